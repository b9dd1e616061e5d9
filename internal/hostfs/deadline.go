package hostfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"syscall"
	"time"
)

// A read of /proc or /sys can block: a process's cmdline, stat or status
// takes its memory-map lock, which a process in uninterruptible sleep
// (common when the unified pool is under pressure) holds for as long as it
// is stuck; a named pipe blocks the same way in open(2). No system call
// takes a deadline, so a collector's reads run as one batch in a goroutine
// that its caller waits for at most the timeout, as node_exporter's
// filesystem collector waits for a stat. The file a batch was reading when
// its caller gave up joins a set of stuck reads until that read returns,
// and any batch that comes to it meanwhile fails at once: a blocked file
// costs one goroutine, not one per scrape.

// DefaultTimeout is --path.read-timeout's default: under Prometheus's
// default scrape timeout (10 s) and within the 5 s shutdown grace.
const DefaultTimeout = 5 * time.Second

// ErrBlocked is what every *BlockedError is: errors.Is(err, ErrBlocked).
var ErrBlocked = errors.New("blocked")

// BlockedError is a read that did not answer within its deadline, or of a
// file whose earlier read has not yet returned (Still: not started).
type BlockedError struct {
	Timeout time.Duration
	Still   bool
}

func (e *BlockedError) Error() string {
	if e.Still {
		return "still blocked: an earlier read has not returned"
	}
	return fmt.Sprintf("blocked: no answer within %s", e.Timeout)
}

func (e *BlockedError) Is(target error) bool { return target == ErrBlocked }

// stuckReads is the set of files, by name relative to the mount point,
// whose read outlived its batch's deadline and has not returned.
type stuckReads struct {
	mu    sync.Mutex
	files map[string]struct{}
}

// Reader reads the files of one batch, in the batch's goroutine.
type Reader struct {
	fs FS
	// Under fs.stuck.mu: the file being read (name, the set's key;
	// shown, what an error calls it), whether the caller gave up on
	// the batch, and whether it then put name in the set.
	name, shown       string
	abandoned, marked bool
}

// Batch runs job in a goroutine and waits for it at most the FS's timeout.
// job reads through r only, and writes only what its caller does not touch
// after a *BlockedError. The error is job's, or an *fs.PathError naming
// the file whose read did not answer in time, whose Err is a
// *BlockedError; no file after it is read.
func (f FS) Batch(job func(r *Reader) error) error {
	r := &Reader{fs: f}
	done := make(chan error, 1)
	go func() { done <- job(r) }()
	timer := time.NewTimer(f.timeout)
	defer timer.Stop()
	select {
	case err := <-done:
		return err
	case <-timer.C:
	}
	f.stuck.mu.Lock()
	defer f.stuck.mu.Unlock()
	select {
	case err := <-done: // it returned as the deadline passed
		return err
	default:
	}
	r.abandoned = true
	if r.name != "" {
		f.stuck.files[r.name] = struct{}{}
		r.marked = true
	}
	return &fs.PathError{Op: "read", Path: r.shown, Err: &BlockedError{Timeout: f.timeout}}
}

// begin records that the file name is being read, or says why it must not
// be: an earlier read of it is stuck, or the batch was given up.
func (r *Reader) begin(name, shown string) error {
	s := r.fs.stuck
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, stuck := s.files[name]; stuck || r.abandoned {
		return &fs.PathError{Op: "read", Path: shown, Err: &BlockedError{Timeout: r.fs.timeout, Still: true}}
	}
	r.name, r.shown = name, shown
	return nil
}

// end records that the read begun has returned.
func (r *Reader) end() {
	s := r.fs.stuck
	s.mu.Lock()
	if r.marked {
		delete(s.files, r.name)
		r.marked = false
	}
	r.name = ""
	s.mu.Unlock()
}

// ReadFile is FS.ReadFile within a batch.
func (r *Reader) ReadFile(name string, buf []byte) ([]byte, error) {
	path := r.fs.Path(name)
	if err := r.begin(name, path); err != nil {
		return nil, err
	}
	defer r.end()
	fd, err := retry(func() (int, error) { return syscall.Open(path, openFlags, 0) })
	if err != nil {
		return buf[:0], &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer syscall.Close(fd)
	data, err := readAll(fd, buf, r.fs.kind, r.fs.limitFor(name))
	if err != nil {
		return data, &fs.PathError{Op: "read", Path: path, Err: err}
	}
	return data, nil
}

// ReadDir is FS.ReadDir within a batch.
func (r *Reader) ReadDir(name string) ([]fs.DirEntry, error) {
	path := r.fs.Path(name)
	if err := r.begin(name+"/", path); err != nil {
		return nil, err
	}
	defer r.end()
	return os.ReadDir(path)
}

// readAt opens rel relative to the directory dir and reads it whole into
// buf, as a task's file (see readAll); errors are the system calls'.
func (r *Reader) readAt(dir int, rel string, buf []byte, limit int) ([]byte, error) {
	if err := r.begin(rel, rel); err != nil {
		return nil, err
	}
	defer r.end()
	fd, err := retry(func() (int, error) { return syscall.Openat(dir, rel, openFlags, 0) })
	if err != nil {
		return buf[:0], err
	}
	defer syscall.Close(fd)
	return readAll(fd, buf, taskFile, limit)
}
