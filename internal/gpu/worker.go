package gpu

import (
	"context"
	"errors"
	"runtime"
	"sync/atomic"
	"time"
)

var errClosed = errors.New("NVML client closed")

// worker runs NVML calls one at a time on one goroutine, so that a call
// wedged in the driver holds that goroutine alone, however many scrapes come.
type worker struct {
	jobs      chan func()
	stop      chan struct{}
	now       func() time.Time
	busySince atomic.Pointer[time.Time] // nil while idle
}

func newWorker(now func() time.Time) *worker {
	w := &worker{jobs: make(chan func()), stop: make(chan struct{}), now: now}
	go w.run()
	return w
}

func (w *worker) run() {
	// One OS thread, as a C library expects of a single-threaded client.
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

// do runs fn on the worker until it finishes or ctx ends. After ctx.Err()
// fn may still run unobserved, so fn must write only to variables the caller
// reads after a nil return.
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

func (w *worker) stalled() time.Duration {
	since := w.busySince.Load()
	if since == nil {
		return 0
	}
	return max(0, w.now().Sub(*since))
}

func (w *worker) close() { close(w.stop) }
