package hostfs

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// readPath reads the file at path with ReadFile, its directory the mount
// point.
func readPath(path string, buf []byte) ([]byte, error) {
	return New(filepath.Dir(path)).ReadFile(filepath.Base(path), buf)
}

func TestReadsWholeFiles(t *testing.T) {
	dir := t.TempDir()
	for _, size := range []int{0, 1, seqFile.grow - 1, seqFile.grow, seqFile.grow + 1, 3*seqFile.grow + 5} {
		data := bytes.Repeat([]byte("0123456789abcde\n"), size/16+1)[:size]
		path := filepath.Join(dir, "f")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, buf := range [][]byte{nil, make([]byte, 3, 10), make([]byte, 0, 2*size+1)} {
			got, err := readPath(path, buf)
			if err != nil {
				t.Fatalf("size %d: %v", size, err)
			}
			if !bytes.Equal(got, data) {
				t.Fatalf("size %d, buffer of %d: read %d bytes, want the file's %d", size, cap(buf), len(got), size)
			}
		}
	}
}

// procfs hands a seq_file out about a page a read, whatever the buffer:
// a short read is not the end of the file. /proc/kallsyms is megabytes of
// text that does not change between two reads; /proc/vmstat, a page or
// more, is read by the pool collector.
func TestReadsSeqFilesToTheEnd(t *testing.T) {
	want, err := os.ReadFile("/proc/kallsyms")
	if err != nil {
		t.Skip("no /proc/kallsyms:", err)
	}
	f := New("/proc")
	f.maxSize = 256 << 20
	got, err := f.ReadFile("kallsyms", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("read %d bytes of /proc/kallsyms, os.ReadFile %d", len(got), len(want))
	}

	want, err = os.ReadFile("/proc/vmstat")
	if err != nil {
		t.Skip("no /proc/vmstat:", err)
	}
	if got, err = readPath("/proc/vmstat", got); err != nil {
		t.Fatal(err)
	}
	// The counters move between the reads; the names do not.
	names := func(data []byte) (ns []string) {
		for line := range strings.Lines(string(data)) {
			ns = append(ns, strings.Fields(line)[0])
		}
		return ns
	}
	if g, w := names(got), names(want); strings.Join(g, ",") != strings.Join(w, ",") {
		t.Errorf("read %d lines of /proc/vmstat (%d bytes), os.ReadFile %d (%d bytes)", len(g), len(got), len(w), len(want))
	}
}

// Errors read as os.ReadFile's do, for the callers' errors.Is checks and
// messages.
func TestErrorsAreOSReadFiles(t *testing.T) {
	dir := t.TempDir()
	for _, path := range []string{filepath.Join(dir, "missing"), dir} {
		_, want := os.ReadFile(path)
		buf, err := readPath(path, make([]byte, 5, 10))
		if err == nil || err.Error() != want.Error() {
			t.Errorf("Read(%s) = %v, want %v", path, err, want)
		}
		var pe *fs.PathError
		if !errors.As(err, &pe) {
			t.Errorf("Read(%s): %T, want *fs.PathError", path, err)
		}
		if len(buf) != 0 || cap(buf) != 10 {
			t.Errorf("Read(%s) returned a buffer of %d/%d, want the one given, emptied", path, len(buf), cap(buf))
		}
	}
	if _, err := readPath(filepath.Join(dir, "missing"), nil); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v, want fs.ErrNotExist", err)
	}
}

func TestCheckRootNamesNoPath(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := New(dir).CheckRoot(); err != nil {
		t.Errorf("a directory: %v", err)
	}
	if err := New(file).CheckRoot(); err == nil || err.Error() != "not a directory" {
		t.Errorf("a file: %v, want not a directory", err)
	}
	err := New(filepath.Join(dir, "missing")).CheckRoot()
	if !errors.Is(err, syscall.ENOENT) || strings.Contains(err.Error(), dir) {
		t.Errorf("a missing directory: %v, want ENOENT without the path", err)
	}
}
