package hostfs

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fifo makes a named pipe at dir/name: opening it blocks until a writer
// comes, as a read of a stuck process's file does.
func fifo(t *testing.T, dir, name string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// unblock opens the pipe for writing and closes it, which ends the open
// that blocked: the read then sees an empty file.
func unblock(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// waitUnblocked polls until a read of name no longer answers "still
// blocked": the worker that blocked has returned.
func waitUnblocked(t *testing.T, read func() error) error {
	t.Helper()
	for range 500 {
		err := read()
		var b *BlockedError
		if !errors.As(err, &b) || !b.Still {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the blocked read never returned")
	return nil
}

// A read that blocks fails after the deadline naming the file; a second
// read of it fails at once without starting another; once the first
// returns, the file is read again.
func TestBlockedReadFailsAtTheDeadline(t *testing.T) {
	dir := t.TempDir()
	path := fifo(t, dir, "meminfo")
	f := New(dir).WithTimeout(50 * time.Millisecond)

	data, err := f.ReadFile("meminfo", make([]byte, 0, 16))
	var blocked *BlockedError
	if !errors.As(err, &blocked) || blocked.Still || !errors.Is(err, ErrBlocked) || data != nil {
		t.Fatalf("a read of a pipe without a writer: %q, %v; want a *BlockedError and no buffer", data, err)
	}
	if !strings.Contains(err.Error(), "meminfo: blocked: no answer within 50ms") {
		t.Errorf("error %q does not name the file and the deadline", err)
	}
	// Still: refused before a worker was started for it.
	_, err = f.ReadFile("meminfo", nil)
	if !errors.As(err, &blocked) || !blocked.Still {
		t.Fatalf("a second read while the first is blocked: %v, want still blocked", err)
	}
	// Other files are read meanwhile.
	if err := os.WriteFile(filepath.Join(dir, "vmstat"), []byte("x 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if data, err := f.ReadFile("vmstat", nil); err != nil || string(data) != "x 1\n" {
		t.Errorf("another file beside the blocked one: %q, %v", data, err)
	}

	unblock(t, path)
	os.Remove(path)
	if err := os.WriteFile(path, []byte("MemTotal: 1 kB\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := waitUnblocked(t, func() error { _, err := f.ReadFile("meminfo", nil); return err }); err != nil {
		t.Errorf("the file once the blocked read returned: %v", err)
	}
}

// The per-process files block the same way (a stuck process's cmdline,
// stat, status), through Read and through Reread's kept files.
func TestProcessesBlockedRead(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"stat", "status"} {
		if err := os.MkdirAll(filepath.Join(dir, "7"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "7", name), []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	path := fifo(t, dir, "7/cmdline")
	ps := New(dir).WithTimeout(50 * time.Millisecond).Processes()
	defer ps.Close()
	list, err := ps.List(t.Context(), nil)
	if err != nil || len(list) != 1 {
		t.Fatalf("List: %v, %v", list, err)
	}
	_, err = ps.Read(t.Context(), 7, "cmdline", nil)
	var pe *fs.PathError
	if !errors.Is(err, ErrBlocked) || !errors.As(err, &pe) || pe.Path != "7/cmdline" {
		t.Fatalf("Read of a blocked cmdline: %v, want blocked naming 7/cmdline", err)
	}
	if _, err := ps.Read(t.Context(), list[0].PID, "status", nil); err != nil {
		t.Errorf("another file of the process: %v", err)
	}
	if _, err := ps.Read(t.Context(), 7, "cmdline", nil); !errors.Is(err, ErrBlocked) {
		t.Errorf("a second read: %v, want still blocked", err)
	}
	unblock(t, path)
	os.Remove(path)
	if err := os.WriteFile(path, []byte("vllm\x00serve\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := waitUnblocked(t, func() error { _, err := ps.Read(t.Context(), 7, "cmdline", nil); return err }); err != nil {
		t.Errorf("after the writer came: %v", err)
	}
}

// Every file has a bound by its kind: beyond it, an error, and the buffer
// grown for it is not handed back.
func TestReadsAreBoundedBySize(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, size int) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), bytes.Repeat([]byte("x"), size), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f := New(dir)
	for _, tc := range []struct {
		name  string
		limit int
	}{{"meminfo", 1 << 20}, {"pressure/memory", 1 << 20}, {"1/stat", 64 << 10}, {"1/status", 64 << 10}, {"1/comm", 64 << 10}, {"1/cmdline", 8 << 20}} {
		write(tc.name, tc.limit)
		given := make([]byte, 0, 10)
		if data, err := f.ReadFile(tc.name, given); err != nil || len(data) != tc.limit {
			t.Errorf("%s at its bound: %d bytes, %v", tc.name, len(data), err)
		}
		write(tc.name, tc.limit+1)
		data, err := f.ReadFile(tc.name, given)
		var tooLarge *TooLargeError
		if !errors.As(err, &tooLarge) || tooLarge.Limit != tc.limit || cap(data) != cap(given) {
			t.Errorf("%s beyond its bound: %d bytes of a buffer of %d, %v; want a TooLargeError and the buffer given", tc.name, len(data), cap(data), err)
		}
	}
	if _, err := New(dir).Sysfs().ReadFile("1/cmdline", nil); !errors.As(err, new(*TooLargeError)) {
		t.Errorf("a sysfs attribute of a command line's size: %v", err)
	}
}

// A link to /dev/zero (endless) or to another file is refused: procfs and
// sysfs files are never links, and a link's target could reach a label.
func TestLinksAreRefused(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "5"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"meminfo", "5/cmdline", "5/stat", "5/status", "5/comm"} {
		if err := os.Symlink("/dev/zero", filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	f := New(dir)
	for _, name := range []string{"meminfo", "5/comm", "5/cmdline"} {
		if _, err := f.ReadFile(name, nil); !errors.Is(err, syscall.ELOOP) {
			t.Errorf("%s -> /dev/zero: %v, want ELOOP", name, err)
		}
	}
	ps := f.Processes()
	defer ps.Close()
	list, err := ps.List(t.Context(), nil)
	if err != nil || len(list) != 1 {
		t.Fatalf("List: %v %v", list, err)
	}
	for _, name := range []string{"stat", "status", "cmdline"} {
		if _, err := ps.Read(t.Context(), 5, name, nil); !errors.Is(err, syscall.ELOOP) {
			t.Errorf("Read %s -> /dev/zero: %v, want ELOOP", name, err)
		}
		if files, err := ps.ReadAll(t.Context(), list, name); err != nil || !errors.Is(files[0].Err, syscall.ELOOP) {
			t.Errorf("ReadAll %s -> /dev/zero: %v, want ELOOP", name, err)
		}
	}
	// A character device itself (not a link) is bounded by size.
	if _, err := New("/dev").ReadFile("zero", nil); !errors.As(err, new(*TooLargeError)) {
		t.Errorf("/dev/zero read directly: %v, want too large", err)
	}
}

// A batch that blocks in its middle fails naming the file and reads no
// file after it; a later batch fails at once on it while it is still
// blocked; once it returns, the batch reads every file.
func TestBatchBlockedInTheMiddle(t *testing.T) {
	dir := t.TempDir()
	write := func(name, data string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("first", "1\n")
	blockedPath := fifo(t, dir, "blocked")
	// A pipe too: opening it for writing without blocking succeeds only
	// while a reader has it open, which tells whether the batch got to it.
	afterPath := fifo(t, dir, "after")
	f := New(dir).WithTimeout(50 * time.Millisecond)
	names := []string{"first", "blocked", "after"}
	batch := func(got *[]string) error {
		return f.Batch(func(r *Reader) error {
			for _, name := range names {
				data, err := r.ReadFile(name, nil)
				if err != nil {
					return err
				}
				*got = append(*got, name+"="+strings.TrimSpace(string(data)))
			}
			return nil
		})
	}

	err := batch(new([]string))
	var pe *fs.PathError
	var b *BlockedError
	if !errors.As(err, &pe) || pe.Path != blockedPath || !errors.As(err, &b) || b.Still {
		t.Fatalf("a batch blocked in its middle: %v, want blocked naming the file", err)
	}
	err = batch(new([]string))
	if !errors.As(err, &pe) || pe.Path != blockedPath || !errors.As(err, &b) || !b.Still {
		t.Fatalf("the next batch while the file is blocked: %v, want still blocked naming the file", err)
	}
	if fd, err := syscall.Open(afterPath, syscall.O_WRONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0); err == nil {
		syscall.Close(fd)
		t.Error("the file after the blocked one was opened")
	} else if !errors.Is(err, syscall.ENXIO) {
		t.Fatal(err)
	}

	unblock(t, blockedPath)
	for _, path := range []string{blockedPath, afterPath} {
		os.Remove(path)
	}
	write("blocked", "2\n")
	write("after", "3\n")
	var got []string
	err = waitUnblocked(t, func() error {
		got = got[:0]
		return batch(&got)
	})
	if err != nil || strings.Join(got, " ") != "first=1 blocked=2 after=3" {
		t.Errorf("once the blocked read returned: %v, %v", got, err)
	}
}

// A batch leaves no descriptor open, whatever it read or failed to read.
func TestBatchLeavesNoDescriptorOpen(t *testing.T) {
	dir := t.TempDir()
	for i, name := range []string{"a", "b", "c"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(strconv.Itoa(i)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f := New(dir)
	f.maxSize = 8
	if err := os.WriteFile(filepath.Join(dir, "large"), bytes.Repeat([]byte("9"), 9), 0o644); err != nil {
		t.Fatal(err)
	}
	before := openFiles(t, dir)
	for range 20 {
		if err := f.Batch(func(r *Reader) error {
			for _, name := range []string{"a", "missing", "b", "large", "c"} {
				data, err := r.ReadFile(name, nil)
				switch name {
				case "missing":
					if !errors.Is(err, fs.ErrNotExist) {
						t.Errorf("%s: %v", name, err)
					}
				case "large":
					if !errors.As(err, new(*TooLargeError)) {
						t.Errorf("%s: %v", name, err)
					}
				default:
					if err != nil || len(data) != 2 {
						t.Errorf("%s: %q %v", name, data, err)
					}
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if n := openFiles(t, dir); n != before {
		t.Errorf("%d files open after 20 batches, %d before", n, before)
	}
}

// A collector run has one deadline: a read after a blocked one waits no
// longer than what is left of it, not a timeout of its own.
func TestRunContextIsOneDeadline(t *testing.T) {
	dir := t.TempDir()
	first, second := fifo(t, dir, "first"), fifo(t, dir, "second")
	t.Cleanup(func() {
		// Whichever read began still waits for a writer.
		for _, path := range []string{first, second} {
			if fd, err := syscall.Open(path, syscall.O_WRONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0); err == nil {
				syscall.Close(fd)
			}
		}
	})
	// Outside a run a read would wait an hour.
	f := New(dir).WithTimeout(time.Hour)
	ctx, cancel := RunContext(t.Context(), 50*time.Millisecond)
	defer cancel()
	run := f.WithContext(ctx)
	_, err := run.ReadFile("first", nil)
	var b *BlockedError
	if !errors.As(err, &b) || b.Still || !strings.Contains(err.Error(), "first: blocked: no answer within 50ms") {
		t.Fatalf("first under the run's deadline: %v, want blocked within 50ms naming it", err)
	}
	// The deadline has passed: the next read is given up at once.
	if _, err := run.ReadFile("second", nil); !errors.As(err, &b) || b.Still || b.Timeout != 50*time.Millisecond {
		t.Fatalf("second under the passed deadline: %v, want blocked", err)
	}
}
