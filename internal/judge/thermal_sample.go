package judge

import "time"

// ThermalSample is one GPU reading; a nil field is one NVML did not report.
type ThermalSample struct {
	Time        time.Time
	Temperature float64  // °C
	Power       float64  // W
	SMClock     *float64 // Hz
	Utilization *float64 // busy ratio, 0–1
	Reasons     *uint64  // NVML's clock event reasons bit mask
	// ThermalSlowdownSeconds adds NVML's SW and HW thermal slowdown counters (since the driver loaded).
	ThermalSlowdownSeconds *float64
	TemperatureMargin      *float64 // °C to the driver's slowdown limit (T.Limit)
	// PowerCapSeconds grows under any sustained load at GB10's ~100 W cap: never evidence of throttling.
	PowerCapSeconds *float64
}

// NVML's clock event reasons for heat, copied from nvml.h so that judge links no NVML; a test checks them.
const (
	reasonSWThermalSlowdown uint64 = 0x20
	ReasonHWThermalSlowdown uint64 = 0x40

	thermalSlowdown = reasonSWThermalSlowdown | ReasonHWThermalSlowdown
)

// thermalSlowdown reports whether the sample carries a heat reason.
func (s ThermalSample) thermalSlowdown() bool {
	return s.Reasons != nil && *s.Reasons&thermalSlowdown != 0
}
