package gpu

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"time"
)

// errClosed is returned for work submitted after the worker stopped.
var errClosed = errors.New("NVML client closed")

// worker runs NVML calls one at a time on one goroutine. A driver call can
// block indefinitely (a wedged GPU); then it holds this one goroutine,
// however many scrapes come: each caller waits only as long as its
// deadline allows, starting nothing.
type worker struct {
	jobs chan func()
	stop chan struct{}
	now  func() time.Time
	// busySince is when the job now running started; nil while idle.
	busySince atomic.Pointer[time.Time]
}

func newWorker(now func() time.Time) *worker {
	w := &worker{jobs: make(chan func()), stop: make(chan struct{}), now: now}
	go w.run()
	return w
}

func (w *worker) run() {
	// One OS thread for every NVML call, as a C library would expect of a
	// single-threaded client.
	runtime.LockOSThread()
	for {
		select {
		case job := <-w.jobs:
			start := w.now()
			w.busySince.Store(&start)
			job()
			w.busySince.Store(nil)
		case <-w.stop:
			return
		}
	}
}

// do runs fn on the worker and waits for it to finish or for ctx to end,
// whichever comes first. On ctx's end it returns ctx.Err(): fn then either
// never runs or finishes later unobserved, so fn must write only to
// variables the caller reads after a nil return.
func (w *worker) do(ctx context.Context, fn func()) error {
	done := make(chan struct{})
	select {
	case w.jobs <- func() { fn(); close(done) }:
	case <-ctx.Done():
		return ctx.Err()
	case <-w.stop:
		return errClosed
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stalled is how long the job now running has run; 0 while idle.
func (w *worker) stalled() time.Duration {
	since := w.busySince.Load()
	if since == nil {
		return 0
	}
	return max(0, w.now().Sub(*since))
}

// close stops the worker once its current call, if any, returns.
func (w *worker) close() { close(w.stop) }
