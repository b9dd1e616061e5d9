// Package cputime measures the CPU time a process spends, for benchmarks
// that report what a scrape costs the machine rather than how long it
// takes: on a loaded machine wall time counts the waits for a CPU too, and
// it leaves out the work other goroutines (the garbage collector, a
// sampler) do for the code measured.
package cputime

import (
	"syscall"
	"testing"
	"time"
)

// Self is the CPU time, user and system, that this process has used so
// far, all threads together.
func Self() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		// getrusage(RUSAGE_SELF) fails only on a bad pointer.
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Loop runs body once per benchmark iteration and reports, beside the
// usual figures, the process's CPU time per iteration as cpu-ns/op.
func Loop(b *testing.B, body func()) {
	b.Helper()
	start := Self()
	for b.Loop() {
		body()
	}
	b.ReportMetric(float64(Self()-start)/float64(b.N), "cpu-ns/op")
}
