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

// A read of /proc or /sys can block: reading a process's cmdline, stat or
// status takes the process's memory-map lock, and a process stuck in
// uninterruptible sleep (common exactly when the unified pool is under
// pressure) holds it for as long as it is stuck; that is why ps hangs on
// such hosts. A named pipe in a fixture tree blocks the same way, in
// open(2). No system call can be given a deadline, so every open and read
// runs in a worker goroutine and its caller waits for it at most the FS's
// timeout.
//
// The reads are handed over in batches (FS.Batch): a scan's hundred
// rereads of kept files go to one worker under one deadline, since a
// hand-off per read doubled the cost of a workloads scan. The worker
// records which file it is reading, so that a batch that does not answer
// in time fails with an *fs.PathError naming that file, whose Err is a
// *BlockedError; the files of the batch not reached are not read. The
// blocked read goes on in its worker; until it returns, a read of the same
// file, in any batch, fails at once ("still blocked") rather than tying up
// a second worker and a second thread.

// DefaultTimeout is the deadline of a read when none is set
// (--path.read-timeout's default): under Prometheus's default scrape
// timeout (10 s) and within the 5 s shutdown grace, so that a blocked read
// fails its collector while the scrape is still answered.
const DefaultTimeout = 5 * time.Second

// ErrBlocked is what every *BlockedError is: errors.Is(err, ErrBlocked).
var ErrBlocked = errors.New("blocked")

// BlockedError is a read that did not answer within its deadline, or of a
// file whose earlier read has not yet returned.
type BlockedError struct {
	Timeout time.Duration
	// Still: an earlier read of the file blocked and has not returned;
	// this one was not started.
	Still bool
}

func (e *BlockedError) Error() string {
	if e.Still {
		return "still blocked: an earlier read has not returned"
	}
	return fmt.Sprintf("blocked: no answer within %s", e.Timeout)
}

// Is makes errors.Is(err, ErrBlocked) hold.
func (e *BlockedError) Is(target error) bool { return target == ErrBlocked }

// workers runs the batches of one FS (and of the Processes and KeptFiles
// made from it) and remembers the files whose read blocked.
type workers struct {
	mu      sync.Mutex
	blocked map[string]struct{} // by name relative to the mount point
	// idle are workers waiting for a batch: a batch is handed to one
	// rather than starting a goroutine.
	idle []*worker
}

// maxIdle bounds the idle workers kept: as many as batches run at once,
// which concurrent scrapes make a handful.
const maxIdle = 4

func newWorkers() *workers { return &workers{blocked: map[string]struct{}{}} }

// worker is a goroutine that runs one batch at a time.
type worker struct {
	start chan struct{}
	done  chan struct{}
	timer *time.Timer

	// The batch handed over, set before start is signalled; its error.
	reader  Reader
	job     func(*Reader) error
	abandon func()
	err     error

	// Under workers.mu: the file being read (name, the blocked set's
	// key; shown, what an error calls it) while reading; marked: the
	// caller gave up during that read and put name in the blocked set.
	name, shown     string
	reading, marked bool
	finished        bool // the job returned in time
	abandoned       bool // its caller gave up on it
}

// Batch runs job in a worker and waits for it at most the FS's timeout.
// job reads through r only, and writes only to what its caller does not
// touch again should the batch fail with a *BlockedError: the batch then
// goes on in the worker until its read under way returns, and every read
// after that fails at once. The error is job's, or an *fs.PathError
// naming the file whose read did not answer in time.
func (f FS) Batch(job func(r *Reader) error) error {
	return f.workers.run(f, job, nil)
}

// run is Batch; abandon, if not nil, runs in the worker once an abandoned
// job returns, to release what it kept (descriptors).
func (ws *workers) run(f FS, job func(*Reader) error, abandon func()) error {
	ws.mu.Lock()
	var w *worker
	if n := len(ws.idle); n > 0 {
		w, ws.idle = ws.idle[n-1], ws.idle[:n-1]
	}
	ws.mu.Unlock()
	if w == nil {
		w = &worker{start: make(chan struct{}), done: make(chan struct{}), timer: time.NewTimer(f.timeout)}
		w.timer.Stop()
		go w.loop(ws)
	}
	w.reader = Reader{fs: f, w: w}
	w.job, w.abandon, w.err = job, abandon, nil
	w.name, w.shown, w.reading, w.marked, w.finished, w.abandoned = "", "", false, false, false, false
	w.timer.Reset(f.timeout)
	w.start <- struct{}{}
	select {
	case <-w.done:
		w.timer.Stop()
		err := w.err
		ws.release(w)
		return err
	case <-w.timer.C:
	}
	ws.mu.Lock()
	if w.finished {
		// It returned as the deadline passed: take the answer.
		ws.mu.Unlock()
		<-w.done
		err := w.err
		ws.release(w)
		return err
	}
	w.abandoned = true
	if w.reading {
		ws.blocked[w.name] = struct{}{}
		w.marked = true
	}
	shown := w.shown
	ws.mu.Unlock()
	return &fs.PathError{Op: "read", Path: shown, Err: &BlockedError{Timeout: f.timeout}}
}

func (w *worker) loop(ws *workers) {
	for range w.start {
		w.err = w.job(&w.reader)
		ws.mu.Lock()
		abandoned := w.abandoned
		if !abandoned {
			w.finished = true
		}
		ws.mu.Unlock()
		if !abandoned {
			w.done <- struct{}{} // the caller releases the worker
			continue
		}
		if w.abandon != nil {
			w.abandon()
		}
		if !ws.release(w) {
			return
		}
	}
}

// release makes w idle again, or ends it when enough are idle; it says
// whether w was kept.
func (ws *workers) release(w *worker) bool {
	w.job, w.abandon, w.err, w.reader = nil, nil, nil, Reader{}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if len(ws.idle) >= maxIdle {
		close(w.start)
		return false
	}
	ws.idle = append(ws.idle, w)
	return true
}

// Reader reads the files of one batch, in its worker: each read a system
// call made directly, the file's name recorded first so that a deadline
// that passes during the read names it.
type Reader struct {
	fs FS
	w  *worker
}

// begin records that the file name (relative to the mount point; shown in
// errors) is being read, or says why it must not be: an earlier read of it
// is still blocked, or the batch's caller gave up on it.
func (r *Reader) begin(name, shown string) error {
	ws := r.fs.workers
	ws.mu.Lock()
	_, blocked := ws.blocked[name]
	if blocked || r.w.abandoned {
		ws.mu.Unlock()
		return &fs.PathError{Op: "read", Path: shown, Err: &BlockedError{Timeout: r.fs.timeout, Still: true}}
	}
	r.w.name, r.w.shown, r.w.reading = name, shown, true
	ws.mu.Unlock()
	return nil
}

// end records that the read begun has returned.
func (r *Reader) end() {
	ws := r.fs.workers
	ws.mu.Lock()
	if r.w.marked {
		delete(ws.blocked, r.w.name)
		r.w.marked = false
	}
	r.w.reading = false
	ws.mu.Unlock()
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
	data, err := readAll(fd, buf, seqFile, r.fs.limitFor(name))
	syscall.Close(fd)
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

// openAt opens rel relative to the directory dir (or as a path when dir
// is -1), rel the blocked set's name of the file and shown what errors
// call it. Errors are the system call's.
func (r *Reader) openAt(dir int, rel, shown string) (int, error) {
	if err := r.begin(rel, shown); err != nil {
		return -1, err
	}
	defer r.end()
	if dir < 0 {
		path := r.fs.Path(rel)
		return retry(func() (int, error) { return syscall.Open(path, openFlags, 0) })
	}
	return retry(func() (int, error) { return syscall.Openat(dir, rel, openFlags, 0) })
}

// readFd reads the file open at fd, named as openAt names it.
func (r *Reader) readFd(fd int, rel, shown string, buf []byte, kind fileKind, limit int) ([]byte, error) {
	if err := r.begin(rel, shown); err != nil {
		return nil, err
	}
	defer r.end()
	return readAll(fd, buf, kind, limit)
}
