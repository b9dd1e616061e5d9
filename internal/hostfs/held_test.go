package hostfs

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// readBatch reads names in one batch of f: each file's content, or its
// error's text.
func readBatch(t *testing.T, f FS, names ...string) []string {
	t.Helper()
	var got []string
	if err := f.Batch(func(r *Reader) error {
		for _, name := range names {
			data, err := r.ReadFile(name, nil)
			if err != nil {
				got = append(got, "error: "+err.Error())
				continue
			}
			got = append(got, strings.TrimSpace(string(data)))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// A holding FS keeps open what its last batch read, and each read is of
// the file at its path now: rewritten, replaced, removed or put back.
func TestHoldingReadsEachFileAsItIsNow(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a": "1\n", "b": "2\n"})
	f := New(dir).Holding()
	if !f.held.checkLinks {
		t.Fatal("a temporary directory is taken for procfs or sysfs")
	}
	before := openFiles(t, dir)

	if got := readBatch(t, f, "a", "b"); fmt.Sprint(got) != "[1 2]" {
		t.Fatalf("first batch: %v", got)
	}
	if n := openFiles(t, dir) - before; n != 2 {
		t.Fatalf("%d files held after a batch of two, want 2", n)
	}

	writeFiles(t, dir, map[string]string{"a": "10\n"}) // in place: the same inode
	replaced := filepath.Join(dir, "b.new")
	if err := os.WriteFile(replaced, []byte("20\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(replaced, filepath.Join(dir, "b")); err != nil {
		t.Fatal(err)
	}
	if got := readBatch(t, f, "a", "b"); fmt.Sprint(got) != "[10 20]" {
		t.Errorf("after a rewrite in place and a replacement: %v, want [10 20]", got)
	}

	if err := os.Remove(filepath.Join(dir, "a")); err != nil {
		t.Fatal(err)
	}
	got := readBatch(t, f, "a", "b")
	if !strings.HasPrefix(got[0], "error: ") || got[1] != "20" {
		t.Errorf("after a is removed: %v, want a's error and b", got)
	}
	writeFiles(t, dir, map[string]string{"a": "100\n"})
	if got := readBatch(t, f, "a", "b"); fmt.Sprint(got) != "[100 20]" {
		t.Errorf("after a is put back: %v", got)
	}

	// A batch that reads only b closes a.
	readBatch(t, f, "b")
	if n := openFiles(t, dir) - before; n != 1 {
		t.Errorf("%d files held after a batch of one, want 1", n)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if n := openFiles(t, dir) - before; n != 0 {
		t.Errorf("%d files held after Close, want none", n)
	}
	if got := readBatch(t, f, "a", "b"); fmt.Sprint(got) != "[100 20]" || openFiles(t, dir) != before {
		t.Errorf("a batch after Close: %v, %d files held, want both read and none held", got, openFiles(t, dir)-before)
	}
}

// A file held open is generated afresh by the kernel at each read:
// /proc/self/io's rchar counts every byte this process has read, the
// last read of it included.
func TestHoldingRereadsProcfsAfresh(t *testing.T) {
	if _, err := os.ReadFile("/proc/self/io"); err != nil {
		t.Skip("no /proc/self/io:", err)
	}
	f := New("/proc").Holding()
	defer f.Close()
	if f.held.checkLinks {
		t.Error("/proc is taken for a tree of plain files: its held files are checked for links")
	}
	before := openFiles(t, "/proc")
	var last string
	for i := range 3 {
		got := readBatch(t, f, "self/io")[0]
		if !strings.HasPrefix(got, "rchar:") {
			t.Fatalf("self/io: %q", got)
		}
		if got == last {
			t.Errorf("read %d of the held self/io is its last read's: %q", i, got)
		}
		last = got
	}
	if n := openFiles(t, "/proc") - before; n != 1 {
		t.Errorf("%d files held, want self/io alone", n)
	}
}

// So is a sysfs attribute: the loopback's count of packets received grows
// by the one sent to it between two reads.
func TestHoldingRereadsSysfsAfresh(t *testing.T) {
	const name = "class/net/lo/statistics/rx_packets"
	if _, err := os.ReadFile("/sys/" + name); err != nil {
		t.Skip("no loopback statistics in /sys:", err)
	}
	f := New("/sys").Sysfs().Holding()
	defer f.Close()
	count := func() uint64 {
		t.Helper()
		n, err := strconv.ParseUint(readBatch(t, f, name)[0], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := count()
	conn, err := net.Dial("udp", "127.0.0.1:9") // discard: nobody need listen
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if after := count(); after <= before {
		t.Errorf("the held rx_packets read %d after a packet, %d before", after, before)
	}
}

// One holding FS keeps at most maxHeld files open (128 under this test's
// descriptor limit); the rest are read as without it.
func TestHoldingIsBounded(t *testing.T) {
	dir := t.TempDir()
	var names []string
	f := New(dir).Holding()
	defer f.Close()
	for i := range f.held.max + 20 {
		name := fmt.Sprintf("f%d", i)
		writeFiles(t, dir, map[string]string{name: fmt.Sprint(i)})
		names = append(names, name)
	}
	before := openFiles(t, dir)
	for range 2 {
		got := readBatch(t, f, names...)
		for i, g := range got {
			if g != fmt.Sprint(i) {
				t.Fatalf("%s: %q", names[i], g)
			}
		}
	}
	if n := openFiles(t, dir) - before; n != f.held.max || n == 0 {
		t.Errorf("%d files held, want at most %d", n, f.held.max)
	}
}

// A batch given up on, still blocked, holds its files apart: the next
// batch opens afresh and holds its own, and when the blocked one returns,
// what it read is closed.
func TestHoldingThroughABlockedBatch(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a": "1\n"})
	blocked := fifo(t, dir, "blocked")
	f := New(dir).Holding().WithTimeout(50 * time.Millisecond)
	defer f.Close()
	before := openFiles(t, dir)

	err := f.Batch(func(r *Reader) error {
		for _, name := range []string{"a", "blocked"} {
			if _, err := r.ReadFile(name, nil); err != nil {
				return err
			}
		}
		return nil
	})
	if !errors.Is(err, ErrBlocked) {
		t.Fatalf("a batch reading a pipe: %v, want blocked", err)
	}
	if got := readBatch(t, f, "a"); fmt.Sprint(got) != "[1]" {
		t.Fatalf("the next batch: %v", got)
	}
	unblock(t, blocked)
	os.Remove(blocked)
	writeFiles(t, dir, map[string]string{"blocked": "3\n", "a": "2\n"})
	if err := waitUnblocked(t, func() error {
		_, err := f.ReadFile("blocked", nil)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// The last batch read only "blocked": it alone is held.
	if n := openFiles(t, dir) - before; n != 1 {
		t.Errorf("%d files held once the blocked batch returned, want the last batch's one", n)
	}
	if got := readBatch(t, f, "a", "blocked"); fmt.Sprint(got) != "[2 3]" {
		t.Errorf("after: %v", got)
	}
}

// A pipe read is not held: it cannot be read again from offset 0, and a
// reader kept open would tell its writer that a scrape is waiting on it.
func TestHoldingHoldsNoPipe(t *testing.T) {
	dir := t.TempDir()
	path := fifo(t, dir, "p")
	f := New(dir).Holding()
	before := openFiles(t, dir)
	written := make(chan error, 1)
	go func() {
		w, err := os.OpenFile(path, os.O_WRONLY, 0) // until the batch opens it
		if err == nil {
			_, err = w.Write([]byte("1\n"))
			w.Close()
		}
		written <- err
	}()
	if got := readBatch(t, f, "p"); fmt.Sprint(got) != "[1]" {
		t.Fatalf("the pipe read %v, want [1]", got)
	}
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	if n := openFiles(t, dir) - before; n != 0 {
		t.Errorf("%d files held after a batch that read a pipe, want none", n)
	}
	if fd, err := syscall.Open(path, syscall.O_WRONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0); err == nil {
		syscall.Close(fd)
		t.Error("the pipe has a reader after the batch")
	}
}
