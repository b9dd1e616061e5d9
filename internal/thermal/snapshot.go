package thermal

import (
	"time"

	"github.com/spark-exporter/spark_exporter/internal/judge"
)

// Snapshot is what the sampler knows after its latest sample. A new one is
// made by every sample of the thermal sampler, and none is changed once made: readers may keep it
// and read it without locks, and must not modify it.
type Snapshot struct {
	// Samples counts the samples taken so far: a reader that keeps what
	// it built from a snapshot builds again when it changes.
	Samples uint64
	// CSV says whether samples are appended to a CSV log; CSVErrors
	// counts the samples that could not be.
	CSV       bool
	CSVErrors int
	// GPUs has one entry per GPU that gave a usable reading at least
	// once, by NVML index, ascending.
	GPUs []GPUState
}

// GPUState is one GPU's thermal state after a sample.
type GPUState struct {
	Index     int // NVML device index
	Verdict   judge.ThermalVerdict
	Episodes  int           // entries into Throttled
	Throttled time.Duration // time spent Throttled
	// Window is the samples the verdict judged, oldest first: the
	// window's and up to as many older ones (Config.Capacity).
	Window []judge.ThermalSample
}
