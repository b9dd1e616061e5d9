package thermal

import (
	"time"

	"github.com/spark-exporter/spark_exporter/internal/judge"
)

// Snapshot is what the sampler knows after its latest sample. None is
// changed once made: readers may keep it and read it without locks, and
// must not modify it.
type Snapshot struct {
	// Samples counts the samples taken so far: a reader that caches what
	// it built from a snapshot rebuilds when it changes.
	Samples uint64
	// CSV: samples are appended to a CSV log; CSVErrors failed to be.
	CSV       bool
	CSVErrors int
	// GPUs holds each GPU that ever gave a usable reading, by NVML index.
	GPUs []GPUState
}

// GPUState is one GPU's thermal state after a sample.
type GPUState struct {
	Index     int // NVML device index
	Verdict   judge.ThermalVerdict
	Episodes  int           // entries into Throttled
	Throttled time.Duration // time spent Throttled
	// Window is the samples the verdict judged, oldest first, and up to
	// as many older ones (Capacity).
	Window []judge.ThermalSample
}
