package thermal

import (
	"errors"

	"github.com/spark-exporter/spark_exporter/internal/judge"
)

// errOutOfOrder is returned for a sample not later than the one before it.
var errOutOfOrder = errors.New("sample is not later than the previous one")

// Window is a bounded ring of the latest samples, oldest first.
type Window struct {
	buf   []judge.ThermalSample
	start int // index of the oldest sample
	n     int
}

// NewWindow holds up to capacity samples; older ones are dropped.
func NewWindow(capacity int) *Window {
	return &Window{buf: make([]judge.ThermalSample, max(capacity, 2))}
}

// Add appends s, dropping the oldest sample when full. A sample that is not
// later than the newest is refused: the analysis needs time to move forward.
func (w *Window) Add(s judge.ThermalSample) error {
	if w.n > 0 && !s.Time.After(w.at(w.n-1).Time) {
		return errOutOfOrder
	}
	if w.n == len(w.buf) {
		w.buf[w.start] = s
		w.start = (w.start + 1) % len(w.buf)
		return nil
	}
	w.buf[(w.start+w.n)%len(w.buf)] = s
	w.n++
	return nil
}

func (w *Window) at(i int) judge.ThermalSample { return w.buf[(w.start+i)%len(w.buf)] }

// Samples returns the held samples, oldest first.
func (w *Window) Samples() []judge.ThermalSample {
	out := make([]judge.ThermalSample, w.n)
	for i := range out {
		out[i] = w.at(i)
	}
	return out
}

// Len is the number of samples held.
func (w *Window) Len() int { return w.n }
