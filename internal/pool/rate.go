package pool

import "time"

// RateWindow is rate(x[Span]) from samples at least Step apart: at most Span/Step + 1 however often it is fed.
type RateWindow struct {
	Span, Step time.Duration
	samples    []rateSample
}

type rateSample struct {
	at time.Time
	v  uint64
}

// Add is false until the oldest sample is Step old; a reset or a clock that went back starts afresh.
func (w *RateWindow) Add(t time.Time, v uint64) (float64, bool) {
	if n := len(w.samples); n > 0 && (v < w.samples[n-1].v || t.Before(w.samples[n-1].at)) {
		w.samples = w.samples[:0]
	}
	drop := 0
	for drop < len(w.samples) && t.Sub(w.samples[drop].at) > w.Span {
		drop++
	}
	w.samples = append(w.samples[:0], w.samples[drop:]...)
	var rate float64
	ok := false
	if len(w.samples) > 0 {
		first := w.samples[0]
		if d := t.Sub(first.at); d >= w.Step {
			rate, ok = float64(v-first.v)/d.Seconds(), true
		}
	}
	if n := len(w.samples); n == 0 || t.Sub(w.samples[n-1].at) >= w.Step {
		w.samples = append(w.samples, rateSample{t, v})
	}
	return rate, ok
}
