package pool

import "time"

// RateWindow is a counter's rate per second over about the last Span, as
// a rule's rate(x[Span]) sees it, from samples kept at least Step apart: it
// holds at most Span/Step + 1 of them however often it is fed.
type RateWindow struct {
	Span, Step time.Duration
	samples    []rateSample
}

type rateSample struct {
	at time.Time
	v  uint64
}

// Add records v at t and returns the rate from the oldest sample within
// Span to it; false until that sample is at least Step old. A counter
// that fell (a reset) or a clock that went back starts the window afresh.
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
