// The thermal throttle verdict's input. internal/thermal steps the verdict
// over time; internal/gpu/thermalsampler reads NVML.

package judge

import "time"

// ThermalSample is one GPU reading; a nil field is one NVML did not report.
type ThermalSample struct {
	Time        time.Time
	Temperature float64  // °C
	Power       float64  // W
	SMClock     *float64 // Hz
	Utilization *float64 // busy ratio, 0–1
	// Reasons is NVML's clock event reasons bit mask.
	Reasons *uint64
	// ThermalSlowdownSeconds is NVML's SW and HW thermal slowdown counters
	// added up: seconds of clocks held down for heat since the driver loaded.
	ThermalSlowdownSeconds *float64
	// TemperatureMargin is NVML's thermal margin: °C left to the
	// driver's slowdown limit (nvidia-smi's T.Limit).
	TemperatureMargin *float64
	// PowerCapSeconds is NVML's SW power cap counter. GB10's ~100 W cap
	// makes it grow under any sustained load: never evidence of throttling.
	PowerCapSeconds *float64
}

// NVML's clock event reasons for heat, from nvml.h: copied so that the
// analysis reads in a sample's terms, not NVML's API; a test checks them.
const (
	ReasonSWThermalSlowdown uint64 = 0x20
	ReasonHWThermalSlowdown uint64 = 0x40

	thermalSlowdown = ReasonSWThermalSlowdown | ReasonHWThermalSlowdown
)

// ThermalSlowdown reports whether the sample carries a heat reason.
func (s ThermalSample) ThermalSlowdown() bool {
	return s.Reasons != nil && *s.Reasons&thermalSlowdown != 0
}
