// The thermal throttle verdict: whether a GPU's recent window shows the
// throttle signature of docs/design.md (GPU busy, power flat below its
// rating, temperature climbing or holding hot) or NVML's thermal slowdown.
// internal/thermal steps it over time (Monitor, Replay); the sampler that
// reads NVML lives beside the GPU reader (internal/gpu/thermalsampler).

package judge

import "time"

// ThermalSample is one GPU reading the analysis can use. Temperature and power are
// required; the rest is nil where NVML did not report it.
type ThermalSample struct {
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
func (s ThermalSample) ThermalSlowdown() bool {
	return s.Reasons != nil && *s.Reasons&thermalSlowdown != 0
}
