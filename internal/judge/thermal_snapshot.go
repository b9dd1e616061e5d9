package judge

import (
	"time"
)

// ThermalSnapshot is never changed once made: readers keep it without locks, and must not modify it.
type ThermalSnapshot struct {
	// A reader that caches what it built rebuilds when Samples changes.
	Samples   uint64
	CSV       bool
	CSVErrors int
	GPUs      []GPUThermalState
}

type GPUThermalState struct {
	Index     int // NVML device index
	Verdict   ThermalVerdict
	Episodes  int           // entries into Throttled
	Throttled time.Duration // time spent Throttled
	// Window: the samples judged, and up to as many older ones.
	Window []ThermalSample
}
