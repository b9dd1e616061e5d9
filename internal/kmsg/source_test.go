package kmsg

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
)

// What is not a kernel log is refused before it is read: a character
// device other than /dev/kmsg (a copy of /dev/zero), a file larger than
// any kernel ring (sparse), a directory.
func TestOpenRefusesWhatIsNoKernelLog(t *testing.T) {
	dir := t.TempDir()
	zero := filepath.Join(dir, "zero")
	if err := syscall.Mknod(zero, syscall.S_IFCHR|0o600, 1<<8|5); err != nil {
		t.Logf("mknod (needs root): %v; the device case is left out", err)
		zero = ""
	}
	sparse := filepath.Join(dir, "sparse")
	if err := os.WriteFile(sparse, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(sparse, 2<<30); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]error{zero: errDevice, sparse: errTooLarge, dir: errKind} {
		if path == "" {
			continue
		}
		r, err := Open(path)
		if !errors.Is(err, want) {
			t.Errorf("Open(%s) = %v, want %v", filepath.Base(path), err, want)
		}
		if r != nil {
			r.Close()
		}
	}
}

// A FIFO whose writer never stops: Open returns after a bounded read and
// the rest is read in the background until Close.
func TestOpenReturnsOnAnEndlessFIFO(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kmsg")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	w, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	line := []byte("4,1,1,-;NVRM: Xid (PCI:0000:01:00): 13, Graphics Exception\n")
	w.Write(line)
	stop := make(chan struct{})
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		for {
			select {
			case <-stop:
				return
			default:
				w.Write(line)
			}
		}
	}()
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	r.Start()
	if !r.Readable() || r.Counts().Xid[13] != 1 {
		t.Errorf("readable %v, counts %v; want the first record counted (the others repeat its number)", r.Readable(), r.Counts().Xid)
	}
	if err := r.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	close(stop)
	w.Close()
	<-wrote
}

// A FIFO with no writer at open is not readable until a writer writes,
// and is read then.
func TestFIFOWithoutWriterFollowed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kmsg")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	r.Start()
	defer r.Close()
	if r.Readable() {
		t.Error("a FIFO nothing was read from is readable")
	}
	w, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatalf("open for writing (no reader?): %v", err)
	}
	defer w.Close()
	w.WriteString("0,5,6,-;nvidia 000f:01:00.0: PCIe Bus Error: severity=Uncorrectable (Fatal), type=Transaction Layer, (Receiver ID)\n")
	testexporter.Eventually(t, 10*time.Second, func() bool { return r.Readable() && r.Counts().AER[Fatal] == 1 },
		"the record a late writer wrote counted")
}

// An overrun counts the records it lost: the gap in sequence numbers.
func TestOverrunCountsTheGap(t *testing.T) {
	r := &Reader{counts: NewCounts()}
	r.lost()
	r.feed([]byte("6,10,1,-;a\n"))
	r.lost()
	r.feed([]byte("6,15,2,-;b\n6,16,3,-;c\n"))
	if got := r.Counts().Skipped[Overrun]; got != 1+4 {
		t.Errorf("overrun skipped %d, want 5 (one before the first record, 11-14)", got)
	}
}
