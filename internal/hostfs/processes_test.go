package hostfs

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io/fs"
	"os"
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

// openFiles counts the descriptors the test process has open.
func openFiles(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
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
		before, read := openFiles(t), 0
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
		if n := openFiles(t); read != processes || n != before {
			t.Errorf("scan %d read %d processes (want %d), %d descriptors open after it, %d before", scan, read, processes, n, before)
		}
	}
}
