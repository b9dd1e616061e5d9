package hostfs

import (
	"errors"
	"fmt"
	"sync"
	"time"
)

// A read of /proc or /sys can block: reading a process's cmdline, stat or
// status takes the process's memory-map lock, and a process stuck in
// uninterruptible sleep (common exactly when the unified pool is under
// pressure) holds it for as long as it is stuck; that is why ps hangs on
// such hosts. A named pipe in a fixture tree blocks the same way, in
// open(2). No system call can be given a deadline, so every open and read
// runs in a worker goroutine and its caller waits for it at most the FS's
// timeout. A read that does not answer in time fails with a *BlockedError
// and goes on in its worker; until it returns, another read of the same
// file fails at once ("still blocked") rather than starting a second
// worker and tying up a second thread.

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

// workers runs the reads of one FS (and of the Processes and KeptFiles
// made from it) and remembers the files whose read blocked.
type workers struct {
	mu      sync.Mutex
	blocked map[string]struct{} // by name relative to the mount point
	// idle are workers waiting for a read: a read hands its work to one
	// rather than starting a goroutine, which cost a workloads scan of
	// a few hundred reads more than the reads' own system calls.
	idle []*worker
}

// maxIdle bounds the idle workers kept: as many as reads run at once,
// which concurrent scrapes make a handful.
const maxIdle = 4

func newWorkers() *workers { return &workers{blocked: map[string]struct{}{}} }

// worker is a goroutine that runs one read at a time.
type worker struct {
	start chan struct{}
	done  chan struct{}
	timer *time.Timer

	// The read handed over, set before start is signalled.
	name    string
	read    func()
	abandon func()
	// Under workers.mu: the read returned; its caller gave up on it.
	finished, abandoned bool
}

// run runs read, which opens and reads the file name, in a worker, and
// waits for it at most timeout. When it returns a *BlockedError, read goes
// on in the worker: the caller must not touch what read writes to (its
// buffer above all), and abandon, if not nil, runs in the worker once read
// returns, to release what read kept (a descriptor).
func (ws *workers) run(name string, timeout time.Duration, read, abandon func()) error {
	ws.mu.Lock()
	if _, ok := ws.blocked[name]; ok {
		ws.mu.Unlock()
		return &BlockedError{Timeout: timeout, Still: true}
	}
	var w *worker
	if n := len(ws.idle); n > 0 {
		w, ws.idle = ws.idle[n-1], ws.idle[:n-1]
	}
	ws.mu.Unlock()
	if w == nil {
		w = &worker{start: make(chan struct{}), done: make(chan struct{}), timer: time.NewTimer(timeout)}
		w.timer.Stop()
		go w.loop(ws)
	}
	w.name, w.read, w.abandon, w.finished, w.abandoned = name, read, abandon, false, false
	w.timer.Reset(timeout)
	w.start <- struct{}{}
	select {
	case <-w.done:
		w.timer.Stop()
		ws.release(w)
		return nil
	case <-w.timer.C:
	}
	ws.mu.Lock()
	if w.finished {
		// It returned as the deadline passed: take the answer.
		ws.mu.Unlock()
		<-w.done
		ws.release(w)
		return nil
	}
	w.abandoned = true
	ws.blocked[name] = struct{}{}
	ws.mu.Unlock()
	return &BlockedError{Timeout: timeout}
}

func (w *worker) loop(ws *workers) {
	for range w.start {
		w.read()
		ws.mu.Lock()
		abandoned := w.abandoned
		if abandoned {
			delete(ws.blocked, w.name)
		} else {
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
		w.read, w.abandon = nil, nil
		if !ws.release(w) {
			return
		}
	}
}

// release makes w idle again, or ends it when enough are idle; it says
// whether w was kept.
func (ws *workers) release(w *worker) bool {
	w.read, w.abandon = nil, nil
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if len(ws.idle) >= maxIdle {
		close(w.start)
		return false
	}
	ws.idle = append(ws.idle, w)
	return true
}
