package hostfs

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// dirent is one linux_dirent64 record as getdents64 writes it, padded to 8
// bytes.
func dirent(ino uint64, name string) []byte {
	reclen := (19 + len(name) + 1 + 7) &^ 7
	b := make([]byte, reclen)
	binary.NativeEndian.PutUint64(b[0:], ino)
	binary.NativeEndian.PutUint64(b[8:], 1)
	binary.NativeEndian.PutUint16(b[16:], uint16(reclen))
	b[18] = syscall.DT_DIR
	copy(b[19:], name)
	return b
}

func TestAppendPids(t *testing.T) {
	buf := slices.Concat(dirent(1, "."), dirent(2, ".."), dirent(40, "1"), dirent(41, "self"),
		dirent(42, "2101"), dirent(43, "0"), dirent(44, "007"), dirent(45, "99999999999"),
		dirent(46, "meminfo"), dirent(47, "4194304"))
	got := appendPids(nil, buf)
	want := []Process{{1, 40}, {2101, 42}, {4194304, 47}}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	// A record that claims more than the buffer holds ends the parse.
	bad := dirent(48, "3000")
	binary.NativeEndian.PutUint16(bad[16:], 200)
	if got := appendPids(nil, slices.Concat(dirent(40, "1"), bad)); !slices.Equal(got, []Process{{1, 40}}) {
		t.Errorf("got %v after a record running past the buffer", got)
	}
}

func FuzzAppendPids(f *testing.F) {
	f.Add(slices.Concat(dirent(40, "1"), dirent(41, "self"), dirent(42, "2101")))
	f.Add(dirent(0, ""))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, buf []byte) {
		for _, e := range appendPids(nil, buf) {
			if e.PID <= 0 {
				t.Errorf("pid %d", e.PID)
			}
		}
	})
}

func TestProcessesReadsWholeFiles(t *testing.T) {
	root := t.TempDir()
	long := strings.Repeat("x", 100_000) // a command line far beyond the first buffer
	for name, data := range map[string]string{"stat": "42 (x) S 1", "cmdline": long, "status": ""} {
		path := filepath.Join(root, "42", name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "meminfo"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	d := New(root).Processes()
	if _, err := d.Read(42, "stat", nil); err == nil {
		t.Error("read before list succeeded")
	}
	entries, err := d.List(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].PID != 42 || entries[0].Ino == 0 {
		t.Fatalf("listed %v, want pid 42 with its inode", entries)
	}
	var buf []byte
	for name, want := range map[string]string{"stat": "42 (x) S 1", "cmdline": long, "status": ""} {
		buf, err = d.Read(42, name, buf)
		if err != nil || !bytes.Equal(buf, []byte(want)) {
			t.Errorf("%s: read %d bytes, %v; want %d bytes", name, len(buf), err, len(want))
		}
	}
	_, err = d.Read(43, "stat", buf)
	if !gone(err) {
		t.Errorf("missing process: %v, want an error that says it has gone", err)
	}
	if _, err := New(filepath.Join(root, "none")).Processes().List(nil); !errors.Is(err, fs.ErrNotExist) || strings.Contains(err.Error(), root) {
		t.Errorf("listing a missing tree: %v, want ErrNotExist without the path", err)
	}
}

// listed lists d and returns the entry of pid.
func listed(t *testing.T, d *Processes, pid int) Process {
	t.Helper()
	entries, err := d.List(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.PID == pid {
			return e
		}
	}
	t.Fatalf("pid %d not listed in %v", pid, entries)
	return Process{}
}

// A file read at every scan stays open while every scan reads it, is read
// afresh each time, and is closed after a scan that does not read it. A new
// directory at the pid is another process: its file is opened anew.
func TestProcessesKeepsFilesReadAtEveryScan(t *testing.T) {
	root := t.TempDir()
	stat := filepath.Join(root, "42", "stat")
	write := func(data string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(stat), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(stat, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("42 (a) S 1")
	dir := New(root).Processes()
	t.Cleanup(func() { dir.Close() })
	reread := func(e Process, want string) {
		t.Helper()
		got, err := dir.Reread(e, "stat", nil)
		if err != nil || string(got) != want {
			t.Errorf("reread: %q, %v; want %q", got, err, want)
		}
	}

	e := listed(t, dir, 42)
	reread(e, "42 (a) S 1")
	if len(dir.kept) != 1 {
		t.Fatalf("%d files kept open, want 1", len(dir.kept))
	}
	fd := dir.kept[keptKey{42, "stat"}].fd
	write("42 (a) R 1") // rewritten in place, as procfs would write it afresh
	reread(listed(t, dir, 42), "42 (a) R 1")
	if got := dir.kept[keptKey{42, "stat"}].fd; got != fd {
		t.Errorf("the file was opened again (fd %d, was %d)", got, fd)
	}

	// The pid's directory replaced by another's: a new process.
	other := filepath.Join(root, "other")
	if err := os.MkdirAll(other, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, "stat"), []byte("42 (b) S 1"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Dir(stat)); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(other, filepath.Dir(stat)); err != nil {
		t.Fatal(err)
	}
	reread(listed(t, dir, 42), "42 (b) S 1")

	// A scan that does not read it; the next listing closes it.
	listed(t, dir, 42)
	listed(t, dir, 42)
	if len(dir.kept) != 0 {
		t.Errorf("%d files kept open after a scan that read none, want 0", len(dir.kept))
	}
}

// No more files are kept open than maxKept; the others are read as before.
func TestProcessesKeepsAtMostMaxKept(t *testing.T) {
	root := t.TempDir()
	for _, pid := range []string{"41", "42"} {
		path := filepath.Join(root, pid, "stat")
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(pid+" (x) S 1"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dir := New(root).Processes()
	t.Cleanup(func() { dir.Close() })
	dir.budget = newDescriptorBudget(1)
	entries, err := dir.List(nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		for _, e := range entries {
			got, err := dir.Reread(e, "stat", nil)
			if want := strconv.Itoa(e.PID) + " (x) S 1"; err != nil || string(got) != want {
				t.Errorf("reread %d: %q, %v; want %q", e.PID, got, err, want)
			}
		}
		if len(dir.kept) != 1 {
			t.Errorf("%d files kept open, want 1", len(dir.kept))
		}
	}
	if dir.Close(); len(dir.kept) != 0 || dir.fd != -1 {
		t.Errorf("after Close: %d files kept open, directory fd %d", len(dir.kept), dir.fd)
	}
}

// On the real /proc, a kept stat is written afresh at every read, and once
// its process has exited it says so, as a file opened anew would.
func TestProcessesKeptFileOfARealProcess(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep program:", err)
	}
	cmd := exec.Command(sleep, "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	defer cmd.Process.Kill()
	dir := New("/proc").Processes()
	t.Cleanup(func() { dir.Close() })
	e := listed(t, dir, pid)
	state := func() byte {
		t.Helper()
		data, err := dir.Reread(e, "stat", nil)
		if err != nil {
			t.Fatalf("reading the child's stat: %v", err)
		}
		// "pid (comm) state …": comm is sleep's, without a ')'.
		_, after, ok := bytes.Cut(data, []byte(") "))
		if !ok || len(after) == 0 {
			t.Fatalf("no state in the child's stat %q", data)
		}
		return after[0]
	}
	state() // opens and keeps it
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// The child has stopped once wait4 reports it so.
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(pid, &ws, syscall.WUNTRACED, nil); err != nil || !ws.Stopped() {
		t.Fatalf("wait4: %v, status %v", err, ws)
	}
	if got := state(); got != 'T' {
		t.Errorf("state %c after SIGSTOP, want T: the kept file was not written afresh", got)
	}
	if len(dir.kept) != 1 {
		t.Fatalf("%d files kept open, want 1", len(dir.kept))
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	if _, err := cmd.Process.Wait(); err != nil && !strings.Contains(err.Error(), "killed") {
		t.Fatal(err)
	}
	if _, err := dir.Reread(e, "stat", nil); !gone(err) {
		t.Errorf("reading an exited process's kept stat: %v, want an error that says it has gone", err)
	}
}

// gone tells whether a read failed because the process exited meanwhile:
// its directory vanished, or the kernel answers ESRCH for a dead task.
func gone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH)
}

// openFiles counts the descriptors the test process has open.
func openFiles(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// Issue 28, item 1: a batch holds at most the descriptor budget's files
// open, whatever the number of processes (the rest are opened, read and
// closed one at a time), and reads every one of them.
func TestRereadAllHoldsAtMostTheBudget(t *testing.T) {
	root := t.TempDir()
	const processes, budget = 300, 10
	for pid := 1; pid <= processes; pid++ {
		path := filepath.Join(root, strconv.Itoa(pid), "stat")
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(strconv.Itoa(pid)+" (x) S 1"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	dir := New(root).Processes()
	t.Cleanup(func() { dir.Close() })
	dir.budget = newDescriptorBudget(budget)
	for scan := range 3 {
		entries, err := dir.List(nil)
		if err != nil {
			t.Fatal(err)
		}
		before, most, read := openFiles(t), 0, 0
		if err := dir.RereadAll(entries, "stat", func(i int, data []byte, err error) error {
			if want := strconv.Itoa(entries[i].PID) + " (x) S 1"; err != nil || string(data) != want {
				t.Errorf("scan %d, pid %d: %q, %v; want %q", scan, entries[i].PID, data, err, want)
			}
			read++
			most = max(most, openFiles(t)-before)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if read != processes {
			t.Errorf("scan %d read %d processes, want %d", scan, read, processes)
		}
		if most > budget || len(dir.kept) > budget {
			t.Errorf("scan %d: %d more descriptors open during the batch, %d kept; budget %d", scan, most, len(dir.kept), budget)
		}
	}
	if dir.Close(); dir.budget.held != 0 {
		t.Errorf("after Close the budget still counts %d descriptors", dir.budget.held)
	}
}

// The same bound holds for KeptFiles, the sysfs reader.
func TestKeptFilesHoldAtMostTheBudget(t *testing.T) {
	root := t.TempDir()
	const files, budget = 300, 10
	var names []string
	for i := range files {
		name := "temp" + strconv.Itoa(i)
		if err := os.WriteFile(filepath.Join(root, name), []byte("41000\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	k := New(root).KeptFiles()
	k.budget = newDescriptorBudget(budget)
	t.Cleanup(func() { k.Close() })
	for batch := range 3 {
		before, most, read := openFiles(t), 0, 0
		if err := k.ReadAll(names, func(i int, data []byte, err error) error {
			if err != nil || string(data) != "41000\n" {
				t.Errorf("batch %d, %s: %q, %v", batch, names[i], data, err)
			}
			read++
			most = max(most, openFiles(t)-before)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if read != files || most > budget || len(k.kept) > budget {
			t.Errorf("batch %d: %d files read, %d more descriptors open during the batch, %d kept; budget %d", batch, read, most, len(k.kept), budget)
		}
	}
	if k.Close(); k.budget.held != 0 {
		t.Errorf("after Close the budget still counts %d descriptors", k.budget.held)
	}
}
