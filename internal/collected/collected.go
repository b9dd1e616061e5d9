// Package collected is what the collectors found at their latest run, as
// plain typed values: the one state that /metrics renders as metrics and
// the status page as its model, so that the two cannot disagree. The
// collector package fills it (collector.Exporter.State); it holds no NVML,
// file or logging type, so that the views link none.
package collected

import (
	"time"

	"github.com/spark-exporter/spark_exporter/internal/container"
	"github.com/spark-exporter/spark_exporter/internal/engine"
	"github.com/spark-exporter/spark_exporter/internal/fabric"
	"github.com/spark-exporter/spark_exporter/internal/gpu/readings"
	"github.com/spark-exporter/spark_exporter/internal/judge"
	"github.com/spark-exporter/spark_exporter/internal/kmsg"
	"github.com/spark-exporter/spark_exporter/internal/pool"
	"github.com/spark-exporter/spark_exporter/internal/thermal"
	"github.com/spark-exporter/spark_exporter/internal/workload"
)

// State is each collector's latest result. A part is nil when its
// collector is off, has not run yet, or failed at its latest run.
type State struct {
	// At is when the latest run of every collector together (a scrape,
	// or a view's own collection) ended; zero before the first.
	At time.Time
	// Runs are each collector's latest run, by name: what
	// spark_scrape_collector_success and _duration_seconds say.
	Runs      []Run
	Pool      *Pool
	GPU       *GPU
	Thermal   *Thermal
	Workloads *workload.Result
	// Containers are where the workloads run, beside Workloads.
	Containers *Containers
	// Engines are the inference engines' latest answers; nil when the
	// engines collector is off.
	Engines []engine.Reading
	Fabric  *Fabric
	// Kernel is nil when the kernel collector is off.
	Kernel *Kernel
	// Flight is nil without the flight recorder (--flight.file).
	Flight *Flight
	// Plans is nil when the plan collector is off.
	Plans []Plan
}

// Run is one collector's latest run.
type Run struct {
	Name     string
	Success  bool
	Duration time.Duration
}

// Pool is the pool collector's reading and the reserve it judged against.
type Pool struct {
	Snapshot pool.Snapshot
	Reserve  uint64
}

// GPU is the gpu collector's latest NVML reading.
type GPU struct {
	// Loaded: NVML is loaded and initialised (spark_gpu_nvml_up).
	Loaded   bool
	Snapshot readings.Snapshot
}

// Thermal is the snapshot the thermal collector rendered and the
// configuration it was judged with.
type Thermal struct {
	Snapshot thermal.Snapshot
	Config   judge.ThermalConfig
}

// Plan is one planned run of --plan.file and its peak need.
type Plan struct {
	Name      string
	PeakBytes float64
}

// Fabric is the fabric collector's latest two readings of the RDMA
// devices: a rate is the difference between them.
type Fabric struct {
	Latest FabricReading
	// Previous is the reading before Latest; nil until two exist.
	Previous *FabricReading
}

// FabricReading is one reading of the RDMA devices and when it was made.
type FabricReading struct {
	At       time.Time
	Snapshot fabric.Snapshot
}

// Kernel is what the kernel collector counted in the kernel log.
type Kernel struct {
	// Readable: the log could be read (spark_kernel_field_supported
	// {field="kmsg"}); Counts is empty otherwise.
	Readable bool
	Counts   kmsg.Counts
}

// Flight is the flight recorder's account of the previous boot.
type Flight struct {
	// Unclean: the previous boot ended without a clean shutdown, less
	// than a day ago (spark_flight_last_boot_unclean); then EndedAt is
	// its last record's time and Verdict the recorder's one line on its
	// last minutes.
	Unclean bool
	EndedAt time.Time
	Verdict string
}

// Containers are the containers the workloads run in.
type Containers struct {
	// ByPID is each workload's container (the zero Ref on the host).
	ByPID map[int]container.Ref
	// Names are the Docker Engine's names of those containers, by short
	// ID; nil without --workloads.docker-socket or when it did not answer.
	Names map[string]container.Info
}
