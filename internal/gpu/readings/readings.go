// Package readings is what NVML reported of each GPU, as plain values; it
// imports no NVML, so that the views link none.
package readings

import "time"

// Snapshot is one read of every device.
type Snapshot struct {
	Time              time.Time
	DriverVersion     string // e.g. 580.95.05
	CUDADriverVersion string // e.g. 13.0
	Devices           []Reading
}

// Reading is one device's state; a nil field is one NVML did not give, and
// Supported says why.
type Reading struct {
	Index int       // NVML device index
	UUID  string    // NVML device UUID
	Time  time.Time // when the reading was taken

	Name              string // product name, e.g. "NVIDIA GB10"; "" if NVML has none
	ComputeCapability string // CUDA compute capability, e.g. "12.1"

	TemperatureCelsius *float64 // GPU core temperature
	PowerWatts         *float64 // power draw
	SMClockHertz       *float64 // current SM clock
	SMClockMaxHertz    *float64 // maximum SM clock
	Utilization        *float64 // GPU busy ratio, 0–1
	ClockEventReasons  *uint64  // nvml.ClocksEventReason* mask
	// ClockEventSeconds is per ClockEvents name, since the driver loaded. On
	// GB10 the mask stays clear while these grow (docs/design.md).
	ClockEventSeconds        map[string]float64
	TemperatureMarginCelsius *float64 // below the slowdown limit: nvidia-smi's "GPU T.Limit Temp"
	PerformanceState         *int     // 0 (P0, full speed) to 15

	EnergyJoules    *float64 // energy used since the driver loaded
	PowerLimitWatts *float64 // enforced power limit; N/A on GB10
	// GB10 has no VRAM and answers NOT_SUPPORTED; some patched drivers give
	// the unified pool's total.
	MemoryTotalBytes *uint64
	MemoryUsedBytes  *uint64
	Processes        []Process // compute processes; nil when not reported

	// Supported is false for NOT_SUPPORTED; a field absent failed this time.
	Supported map[Field]bool
}

type Process struct {
	PID       uint32
	UsedBytes uint64
}

// Field is a group of NVML readings a device supports as a whole: the
// field label of spark_gpu_field_supported.
type Field string

const (
	FieldMemoryInfo         Field = "memory_info"
	FieldPowerLimit         Field = "power_limit"
	FieldEnergy             Field = "energy"
	FieldTemperature        Field = "temperature"
	FieldPower              Field = "power"
	FieldSMClock            Field = "sm_clock"
	FieldUtilization        Field = "utilization"
	FieldClocksEventReasons Field = "clocks_event_reasons"
	FieldProcesses          Field = "processes"
	// FieldClocksEventCounters is supported when NVML answers any counter.
	FieldClocksEventCounters Field = "clocks_event_counters"
	FieldTemperatureMargin   Field = "temperature_margin"
	FieldPerformanceState    Field = "performance_state"
)

var Fields = []Field{
	FieldMemoryInfo, FieldPowerLimit, FieldEnergy, FieldTemperature, FieldPower,
	FieldSMClock, FieldUtilization, FieldClocksEventReasons, FieldProcesses,
	FieldClocksEventCounters, FieldTemperatureMargin, FieldPerformanceState,
}

// ClockEvent is a counter's label and NVML field id (nvml.h's
// NVML_FI_DEV_CLOCKS_EVENT_REASON_*, in ns; 269-271 since R535).
type ClockEvent struct {
	Name    string
	FieldID uint32
}

var ClockEvents = []ClockEvent{
	{"sw_power_cap", 74},
	{"sync_boost", 76},
	{"sw_thermal_slowdown", 269},
	{"hw_thermal_slowdown", 270},
	{"hw_power_brake_slowdown", 271},
}

// ClockEventReason is a bit of the reasons mask and its label.
type ClockEventReason struct {
	Bit  uint64
	Name string
}

// ClockEventReasons are nvml.ClocksEventReason*'s bits (the hardware ones
// only under NVML's older "throttle" names).
var ClockEventReasons = []ClockEventReason{
	{0x1, "gpu_idle"},
	{0x2, "applications_clocks_setting"},
	{0x4, "sw_power_cap"},
	{0x8, "hw_slowdown"},
	{0x10, "sync_boost"},
	{0x20, "sw_thermal_slowdown"},
	{0x40, "hw_thermal_slowdown"},
	{0x80, "hw_power_brake_slowdown"},
	{0x100, "display_clock_setting"},
}

// ActiveClockEvents is empty when the mask was not read.
func (r Reading) ActiveClockEvents() []string {
	out := []string{}
	if r.ClockEventReasons == nil {
		return out
	}
	for _, reason := range ClockEventReasons {
		if *r.ClockEventReasons&reason.Bit != 0 {
			out = append(out, reason.Name)
		}
	}
	return out
}
