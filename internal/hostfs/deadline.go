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
// (common under pool pressure) holds while it is stuck; a named pipe
// blocks in open(2). No system call takes a deadline, so reads run in a
// goroutine that the caller waits for until the collector run's deadline,
// as node_exporter's filesystem collector waits for a stat. The file being
// read when the caller gave up joins a set of stuck reads until its read
// returns, and a read of it meanwhile fails at once: a blocked file costs
// one goroutine, not one per scrape.

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
// file whose earlier read has not returned (Still: not started).
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
	// Under fs.stuck.mu: the file being read (name is its key in the set,
	// shown what an error calls it), whether the caller gave up on the
	// batch, and whether it then put name in the set.
	name, shown       string
	abandoned, marked bool
	// A holding FS's files: held from the last batch, and kept for the next.
	held, keep map[string]int
}

// Batch runs job in a goroutine and waits for it until the collector run's
// deadline, or the FS's timeout outside a run. job reads through r only,
// and writes only what its caller leaves alone after a *BlockedError: the
// error, an *fs.PathError naming the file whose read did not answer.
func (f FS) Batch(job func(r *Reader) error) error {
	ctx, timeout := f.ctx, f.timeout
	if t, ok := ctx.Value(timeoutKey{}).(time.Duration); ok {
		timeout = t
	} else {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	r := &Reader{fs: f, timeout: timeout}
	if f.held != nil {
		r.held, r.keep = f.held.take()
	}
	done := make(chan error, 1)
	go func() {
		err := job(r)
		if f.held != nil {
			f.held.give(r.keep, r.held)
		}
		done <- err
	}()
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

// begin notes that the file name is being read, or fails: an earlier read
// of it is stuck, or the batch was given up.
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

// end notes that the read begun has returned.
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

// ReadFile is FS.ReadFile within a batch. name is an fs.ValidPath, and so
// clean already: filepath.Join's Clean was a third of a sysfs read's cost.
func (r *Reader) ReadFile(name string, buf []byte) ([]byte, error) {
	if !fs.ValidPath(name) {
		return buf[:0], &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	return r.read(name, atFDCWD, r.fs.root+"/"+name, buf, r.fs.kind)
}

// read opens path, relative to the directory open at dir, and reads it
// whole into buf; name is its key in the set of stuck reads. Errors are
// *fs.PathError naming path.
func (r *Reader) read(name string, dir int, path string, buf []byte, kind fileKind) ([]byte, error) {
	if err := r.begin(name, path); err != nil {
		return nil, err
	}
	defer r.end()
	holding := r.keep != nil && dir == atFDCWD
	if holding {
		if data, ok := r.readHeld(name, buf, kind); ok {
			return data, nil
		}
	}
	fd, err := retry(func() (int, error) { return syscall.Openat(dir, path, openFlags, 0) })
	if err != nil {
		return buf[:0], &fs.PathError{Op: "open", Path: path, Err: err}
	}
	data, err := readAll(fd, buf, kind, r.fs.limitFor(name), false)
	if err != nil || !holding || !r.hold(name, fd) {
		syscall.Close(fd)
	}
	if err != nil {
		return data, &fs.PathError{Op: "read", Path: path, Err: err}
	}
	return data, nil
}

// ReadDir lists the directory name within a batch, as os.ReadDir does.
func (r *Reader) ReadDir(name string) ([]fs.DirEntry, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	path := r.fs.Path(name)
	if err := r.begin(name+"/", path); err != nil {
		return nil, err
	}
	defer r.end()
	return os.ReadDir(path)
}
