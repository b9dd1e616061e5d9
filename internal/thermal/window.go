package thermal

import (
	"errors"

	"github.com/spark-exporter/spark_exporter/internal/judge"
)

var errOutOfOrder = errors.New("sample is not later than the previous one")

// window slides over a buffer of twice its capacity, so that the analysis reads one slice without a copy per sample.
type window struct {
	capacity int
	buf      []judge.ThermalSample // the buffer the window slides over
	held     []judge.ThermalSample // the window: a slice of buf
}

func newWindow(capacity int) *window {
	capacity = max(capacity, 2)
	buf := make([]judge.ThermalSample, 0, 2*capacity)
	return &window{capacity: capacity, buf: buf, held: buf}
}

// add refuses a sample not later than the newest: the analysis needs time to move forward.
func (w *window) add(s judge.ThermalSample) error {
	if n := len(w.held); n > 0 && !s.Time.After(w.held[n-1].Time) {
		return errOutOfOrder
	}
	if len(w.held) == w.capacity {
		w.held = w.held[1:]
	}
	if len(w.held) == cap(w.held) {
		w.held = w.buf[:copy(w.buf[:cap(w.buf)], w.held)]
	}
	w.held = append(w.held, s)
	return nil
}

func (w *window) samples() []judge.ThermalSample {
	out := make([]judge.ThermalSample, len(w.held))
	copy(out, w.held)
	return out
}

// view is valid until the next Add.
func (w *window) view() []judge.ThermalSample { return w.held }
