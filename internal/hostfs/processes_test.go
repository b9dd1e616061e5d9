package hostfs

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
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
	if _, err := d.Read(t.Context(), 42, "stat", nil); err == nil {
		t.Error("read before list succeeded")
	}
	entries, err := d.List(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].PID != 42 || entries[0].Ino == 0 {
		t.Fatalf("listed %v, want pid 42 with its inode", entries)
	}
	var buf []byte
	for name, want := range map[string]string{"stat": "42 (x) S 1", "cmdline": long, "status": ""} {
		buf, err = d.Read(t.Context(), 42, name, buf)
		if err != nil || !bytes.Equal(buf, []byte(want)) {
			t.Errorf("%s: read %d bytes, %v; want %d bytes", name, len(buf), err, len(want))
		}
	}
	_, err = d.Read(t.Context(), 43, "stat", buf)
	if !gone(err) {
		t.Errorf("missing process: %v, want an error that says it has gone", err)
	}
	if _, err := New(filepath.Join(root, "none")).Processes().List(t.Context(), nil); !errors.Is(err, fs.ErrNotExist) || strings.Contains(err.Error(), root) {
		t.Errorf("listing a missing tree: %v, want ErrNotExist without the path", err)
	}
}

// gone tells whether a read failed because the process exited meanwhile:
// its directory vanished, or the kernel answers ESRCH for a dead task.
func gone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH)
}

// openFiles counts the descriptors the test process has open on dir or
// on a file under it. A count of all of them would also see a descriptor
// another test's blocked read, or a finalizer, closes meanwhile.
func openFiles(t *testing.T, dir string) int {
	t.Helper()
	dir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err == nil && (target == dir || strings.HasPrefix(target, dir+"/")) {
			n++
		}
	}
	return n
}

// Issue 28, item 1: a batch of any number of processes holds one
// descriptor at a time beside the tree's, and reads every one of them.
func TestReadAllHoldsOneDescriptorAtATime(t *testing.T) {
	root := t.TempDir()
	const processes = 300
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
	for scan := range 3 {
		entries, err := dir.List(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		before, read := openFiles(t, root), 0
		files, err := dir.ReadAll(t.Context(), entries, "stat")
		if err != nil {
			t.Fatal(err)
		}
		for i, f := range files {
			if want := strconv.Itoa(entries[i].PID) + " (x) S 1"; f.Err != nil || string(f.Data) != want {
				t.Errorf("scan %d, pid %d: %q, %v; want %q", scan, entries[i].PID, f.Data, f.Err, want)
			}
			read++
		}
		if n := openFiles(t, root); read != processes || n != before {
			t.Errorf("scan %d read %d processes (want %d), %d descriptors open after it, %d before", scan, read, processes, n, before)
		}
	}
}

// In this pid namespace's procfs a process's run time is its CPU clock:
// it reads the same while the process waits, moves once it has run, and
// fails once it has exited. In another tree (a fixture) it is the
// schedstat file, held open only when asked to.
func TestKeepRunTime(t *testing.T) {
	cat := exec.Command("cat")
	in, err := cat.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cat.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cat.Start(); err != nil {
		t.Fatal(err)
	}
	defer cat.Process.Kill()
	// cat has run once it echoes a line: from then on it waits in read.
	echo := func() {
		t.Helper()
		if _, err := in.Write([]byte("x\n")); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(out, make([]byte, 2)); err != nil {
			t.Fatal(err)
		}
	}
	echo()
	// Its write may return before it is back in read: wait until it sleeps.
	for i := 0; ; i++ {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(cat.Process.Pid) + "/stat")
		if err != nil {
			t.Fatal(err)
		}
		if f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:])); len(f) > 0 && f[0] == "S" {
			break
		}
		if i == 100_000 {
			t.Fatal("cat never waits in read")
		}
		runtime.Gosched()
	}

	d := New("/proc").Processes()
	defer d.Close()
	k, first, err := d.KeepRunTime(context.Background(), cat.Process.Pid, false, nil)
	if err != nil || !k.Held() || k.HoldsFile() {
		t.Fatalf("KeepRunTime in /proc: %+v, %v; want the clock, no file", k, err)
	}
	first = slices.Clone(first)
	again := func() File {
		t.Helper()
		files, err := d.ReadKept(context.Background(), []Kept{k})
		if err != nil {
			t.Fatal(err)
		}
		return files[0]
	}
	if f := again(); f.Err != nil || !bytes.Equal(f.Data, first) {
		t.Errorf("cat waiting: %x, %v; want %x as before", f.Data, f.Err, first)
	}
	echo()
	if f := again(); f.Err != nil || bytes.Equal(f.Data, first) {
		t.Errorf("cat after it ran: %x, %v; want another time than %x", f.Data, f.Err, first)
	}
	cat.Process.Kill()
	cat.Wait()
	if f := again(); !errors.Is(f.Err, syscall.ESRCH) {
		t.Errorf("cat exited: %x, %v; want ESRCH", f.Data, f.Err)
	}

	tree := t.TempDir()
	if err := os.MkdirAll(filepath.Join(tree, "7"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tree, "7", "schedstat"), []byte("1 2 3\n"), 0o444); err != nil {
		t.Fatal(err)
	}
	fixture := New(tree).Processes()
	defer fixture.Close()
	if _, err := fixture.List(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if k, _, err := fixture.KeepRunTime(context.Background(), 7, false, nil); err != nil || k.Held() {
		t.Errorf("a fixture, not asked to open: %+v, %v; want nothing held", k, err)
	}
	k, data, err := fixture.KeepRunTime(context.Background(), 7, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	if !k.HoldsFile() || string(data) != "1 2 3\n" {
		t.Errorf("a fixture: %+v, %q; want its schedstat held open", k, data)
	}
}
