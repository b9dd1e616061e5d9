// Package readings is what NVML reported of each GPU, as plain values: the
// NVML client (internal/gpu) makes them, /metrics and the status page
// render them. It imports no NVML, so that the views link none.
package readings

import "time"

// Snapshot is one read of every device.
type Snapshot struct {
	Time              time.Time
	DriverVersion     string // e.g. 580.95.05
	CUDADriverVersion string // e.g. 13.0
	Devices           []Reading
}

// Reading is one device's state at one moment, as NVML reported it. A nil
// field is a value NVML did not give this time (not supported, or the call
// failed); it is never replaced by a guess. Supported tells the two apart.
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
	// ClockEventReasons is NVML's bit mask of why clocks are held down
	// (nvml.ClocksEventReason* constants: thermal slowdowns, power cap, …).
	ClockEventReasons *uint64
	// ClockEventSeconds is, per reason of ClockEvents (by name), the time the
	// driver has held the clocks down for it since it loaded (NVML field
	// values, in ns). On GB10 the flags above stay clear while these grow, so
	// these are the evidence (docs/design.md).
	ClockEventSeconds map[string]float64
	// TemperatureMarginCelsius is how far the GPU is below its slowdown
	// limit (nvidia-smi's "GPU T.Limit Temp").
	TemperatureMarginCelsius *float64
	// PerformanceState is the P-state: 0 (P0, full speed) to 15; nil if unknown.
	PerformanceState *int

	EnergyJoules    *float64 // energy used since the driver loaded
	PowerLimitWatts *float64 // enforced power limit; N/A on GB10
	// MemoryTotalBytes and MemoryUsedBytes are NVML's memory info, the
	// nvidia-smi view. GB10 has no VRAM and answers NOT_SUPPORTED; some
	// patched drivers answer with the unified pool's total instead.
	MemoryTotalBytes *uint64
	MemoryUsedBytes  *uint64
	// Processes are the compute processes on the device and the memory
	// each holds; nil when the device does not report them.
	Processes []Process

	// Supported says, for each field NVML was asked about, whether the
	// device answered (true) or said NOT_SUPPORTED (false). A field that
	// is absent failed this time with another error.
	Supported map[Field]bool
}

// Process is one process holding memory on a device.
type Process struct {
	PID       uint32
	UsedBytes uint64
}

// Field is a group of NVML readings that a device supports or not as a
// whole; it is the field label of spark_gpu_field_supported.
type Field string

// The fields, as docs/metrics.md names them.
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
	// FieldClocksEventCounters is supported when NVML answers at least one
	// of the clock event counters; a driver older than the counter it is
	// asked for (269-271 are R535's) leaves that one out.
	FieldClocksEventCounters Field = "clocks_event_counters"
	FieldTemperatureMargin   Field = "temperature_margin"
	FieldPerformanceState    Field = "performance_state"
)

// Fields lists every field, in docs/metrics.md's order.
var Fields = []Field{
	FieldMemoryInfo, FieldPowerLimit, FieldEnergy, FieldTemperature, FieldPower,
	FieldSMClock, FieldUtilization, FieldClocksEventReasons, FieldProcesses,
	FieldClocksEventCounters, FieldTemperatureMargin, FieldPerformanceState,
}

// ClockEvent is a clock event counter: the reason's name, as
// spark_gpu_clocks_event_seconds_total labels it, and NVML's field id
// (nvml.h: NVML_FI_DEV_CLOCKS_EVENT_REASON_*, values in nanoseconds).
type ClockEvent struct {
	Name    string
	FieldID uint32
}

// ClockEvents are the counters read, in docs/metrics.md's order.
var ClockEvents = []ClockEvent{
	{"sw_power_cap", 74},
	{"sync_boost", 76},
	{"sw_thermal_slowdown", 269},
	{"hw_thermal_slowdown", 270},
	{"hw_power_brake_slowdown", 271},
}

// ClockEventReason is a bit of NVML's clock event reasons mask and its name
// as spark_gpu_clocks_event_active labels it.
type ClockEventReason struct {
	Bit  uint64
	Name string
}

// ClockEventReasons are the nine reasons of docs/metrics.md, by NVML bit
// (nvml.ClocksEventReason*; the hardware bits only have NVML's older
// "throttle" names).
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

// ActiveClockEvents names the reasons the reading's mask holds, in
// ClockEventReasons' order; empty when the mask was not read.
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
