package hostfs

import (
	"context"
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
// takes a deadline, so reads run in a goroutine that their caller waits for
// until the collector run's deadline, as node_exporter's filesystem
// collector waits for a stat. The file being read when the caller gave up
// joins a set of stuck reads until that read returns, and a read that
// comes to it meanwhile fails at once: a blocked file costs one goroutine,
// not one per scrape.

// DefaultTimeout is --path.read-timeout's default: under Prometheus's
// default scrape timeout (10 s) and within the 5 s shutdown grace.
const DefaultTimeout = 5 * time.Second

type timeoutKey struct{}

// RunContext returns parent bounded by timeout (DefaultTimeout when 0):
// the one deadline of a collector run's reads.
func RunContext(parent context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return context.WithTimeout(context.WithValue(parent, timeoutKey{}, timeout), timeout)
}

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
// whose read outlived its deadline and has not returned.
type stuckReads struct {
	mu    sync.Mutex
	files map[string]struct{}
}

// Reader reads the files of one batch, in the batch's goroutine.
type Reader struct {
	fs      FS
	timeout time.Duration
	// Under fs.stuck.mu: the file being read (name, the set's key;
	// shown, what an error calls it), whether the caller gave up on
	// the batch, and whether it then put name in the set.
	name, shown       string
	abandoned, marked bool
}

// Batch runs job in a goroutine and waits for it until the deadline of
// the FS's context, or for its timeout outside a collector run. job reads
// through r only, and writes only what its caller does not touch after a
// *BlockedError. The error is job's, or an *fs.PathError naming the file
// whose read did not answer in time, whose Err is a *BlockedError; no file
// after it is read.
func (f FS) Batch(job func(r *Reader) error) error {
	ctx, timeout := f.ctx, f.timeout
	if ctx == nil {
		ctx = context.Background()
	}
	if t, ok := ctx.Value(timeoutKey{}).(time.Duration); ok {
		timeout = t
	} else {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	r := &Reader{fs: f, timeout: timeout}
	done := make(chan error, 1)
	go func() { done <- job(r) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
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
	return &fs.PathError{Op: "read", Path: r.shown, Err: &BlockedError{Timeout: timeout}}
}

// begin records that the file name is being read, or says why it must not
// be: an earlier read of it is stuck, or the batch was given up.
func (r *Reader) begin(name, shown string) error {
	s := r.fs.stuck
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, stuck := s.files[name]; stuck || r.abandoned {
		return &fs.PathError{Op: "read", Path: shown, Err: &BlockedError{Timeout: r.timeout, Still: true}}
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
	return r.read(name, path, buf, r.fs.kind, r.fs.limitFor(name),
		func() (int, error) { return syscall.Open(path, openFlags, 0) })
}

// read opens a file, name relative to the mount point, and reads it whole
// into buf; errors are *fs.PathError naming it shown.
func (r *Reader) read(name, shown string, buf []byte, kind fileKind, limit int, open func() (int, error)) ([]byte, error) {
	if err := r.begin(name, shown); err != nil {
		return nil, err
	}
	defer r.end()
	fd, err := retry(open)
	if err != nil {
		return buf[:0], &fs.PathError{Op: "open", Path: shown, Err: err}
	}
	defer syscall.Close(fd)
	data, err := readAll(fd, buf, kind, limit)
	if err != nil {
		return data, &fs.PathError{Op: "read", Path: shown, Err: err}
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
