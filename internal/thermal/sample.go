// Package thermal is the thermal watch: it judges a GPU's recent
// temperature and power, whether the window shows the throttle signature of
// docs/design.md (GPU busy, power flat below its rating, temperature
// climbing or holding hot), and how long and how often it did.
//
// The analysis (Analyze, Window, Monitor) is a pure function of samples,
// thresholds and the time given: no clock, no I/O. The Sampler around it
// does the I/O, reading NVML, appending to the CSV log (internal/thermallog)
// and logging episodes, and it too is told the time; only its Run loop
// reads a clock.
package thermal

import (
	"errors"
	"time"
)

// Sample is one GPU reading the analysis can use. Temperature and power are
// required; the rest is nil where NVML did not report it.
type Sample struct {
	Time        time.Time
	Temperature float64  // °C
	Power       float64  // W
	SMClock     *float64 // Hz
	Utilization *float64 // busy ratio, 0–1
	// Reasons is NVML's clock event reasons bit mask.
	Reasons *uint64
	// ThermalSlowdownSeconds is NVML's SW and HW thermal slowdown
	// counters added up: seconds the driver has held the clocks down for
	// heat since it loaded. nil where neither counter is reported.
	ThermalSlowdownSeconds *float64
	// TemperatureMargin is NVML's thermal margin: °C left to the
	// driver's slowdown limit (nvidia-smi's T.Limit).
	TemperatureMargin *float64
	// PowerCapSeconds is NVML's SW power cap counter. GB10's ~100 W
	// platform cap makes it grow under any sustained load: it is never
	// evidence of throttling, only reported beside it.
	PowerCapSeconds *float64
}

// NVML's clock event reasons that say the GPU slowed itself because of
// heat, from nvml.h (go-nvml: nvml.ClocksEventReasonSwThermalSlowdown and
// nvml.ClocksThrottleReasonHwThermalSlowdown). They are kept here rather
// than imported so that the analysis reads in the terms of a sample, not of
// NVML's API; a test checks them against go-nvml.
const (
	ReasonSWThermalSlowdown uint64 = 0x20
	ReasonHWThermalSlowdown uint64 = 0x40

	thermalSlowdown = ReasonSWThermalSlowdown | ReasonHWThermalSlowdown
)

// ThermalSlowdown reports whether NVML said, in this sample, that the GPU
// is slowing itself because of heat.
func (s Sample) ThermalSlowdown() bool {
	return s.Reasons != nil && *s.Reasons&thermalSlowdown != 0
}

// errOutOfOrder is returned for a sample not later than the one before it.
var errOutOfOrder = errors.New("sample is not later than the previous one")

// Window is a bounded ring of the latest samples, oldest first.
type Window struct {
	buf   []Sample
	start int // index of the oldest sample
	n     int
}

// NewWindow holds up to capacity samples; older ones are dropped.
func NewWindow(capacity int) *Window {
	return &Window{buf: make([]Sample, max(capacity, 2))}
}

// Add appends s, dropping the oldest sample when full. A sample that is not
// later than the newest is refused: the analysis needs time to move forward.
func (w *Window) Add(s Sample) error {
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

func (w *Window) at(i int) Sample { return w.buf[(w.start+i)%len(w.buf)] }

// Samples returns the held samples, oldest first.
func (w *Window) Samples() []Sample {
	out := make([]Sample, w.n)
	for i := range out {
		out[i] = w.at(i)
	}
	return out
}

// Len is the number of samples held.
func (w *Window) Len() int { return w.n }
