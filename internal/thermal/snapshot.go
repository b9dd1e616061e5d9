package thermal

import (
	"time"

	"github.com/spark-exporter/spark_exporter/internal/judge"
)

// Snapshot is never changed once made: readers keep it without locks, and must not modify it.
type Snapshot struct {
	// A reader that caches what it built rebuilds when Samples changes.
	Samples   uint64
	CSV       bool
	CSVErrors int
	GPUs      []GPUState
}

type GPUState struct {
	Index     int // NVML device index
	Verdict   judge.ThermalVerdict
	Episodes  int           // entries into Throttled
	Throttled time.Duration // time spent Throttled
	// Window: the samples judged, and up to as many older ones.
	Window []judge.ThermalSample
}
