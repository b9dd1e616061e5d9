// Package collected is what the collectors found at their latest run, as
// plain values: the one state /metrics and the status page both render, so
// that the two cannot disagree. It holds no NVML, file or logging type, so
// that the views link none.
package collected

import (
	"sync"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/container"
	"github.com/spark-exporter/spark_exporter/internal/engine"
	"github.com/spark-exporter/spark_exporter/internal/fabric"
	"github.com/spark-exporter/spark_exporter/internal/gpu/readings"
	"github.com/spark-exporter/spark_exporter/internal/judge"
	"github.com/spark-exporter/spark_exporter/internal/kmsg"
	"github.com/spark-exporter/spark_exporter/internal/pool"
	"github.com/spark-exporter/spark_exporter/internal/workload"
)

// State is each collector's latest result. A part is nil when its
// collector is off, has not run yet, or failed at its latest run; but GPU,
// which says so in Failing.
type State struct {
	// At is when the latest complete collection ended; zero before the first.
	At time.Time
	// Runs are what spark_scrape_collector_success and _duration_seconds say.
	Runs       []Run
	Pool       *Pool
	GPU        *GPU
	Thermal    *Thermal
	Workloads  *workload.Result
	Containers *Containers
	Engines    []engine.Reading
	// EngineTargets are the engines the latest round asked (/sd/engines).
	EngineTargets []engine.Target
	Fabric        *Fabric
	Kernel        *Kernel
	Flight        *Flight
	Plans         []Plan
}

// Results is where each collector's Update stores its part and the views
// read it: one lock, so that a reader sees every part of one moment.
type Results struct {
	mu    sync.Mutex
	parts State
	// waiting run at the first Complete.
	waiting []func()
}

// Complete marks the end of a collection of every collector at at.
func (r *Results) Complete(at time.Time) {
	r.mu.Lock()
	waiting := r.waiting
	r.waiting = nil
	r.parts.At = at
	r.mu.Unlock()
	for _, f := range waiting {
		f()
	}
}

// AfterFirst runs f once the first complete collection has ended: now when
// it has, else within that Complete.
func (r *Results) AfterFirst(f func()) {
	r.mu.Lock()
	if r.parts.At.IsZero() {
		r.waiting = append(r.waiting, f)
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	f()
}

// Awaited: AfterFirst waits for the first complete collection.
func (r *Results) Awaited() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.waiting) > 0
}

// Set changes the parts under the lock; a nil Results keeps nothing.
func (r *Results) Set(set func(parts *State)) {
	if r == nil {
		return
	}
	r.mu.Lock()
	set(&r.parts)
	r.mu.Unlock()
}

// Parts is the parts and At (Runs unset), shared, not copied: read them,
// never change them.
func (r *Results) Parts() State {
	if r == nil {
		return State{}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.parts
}

// Run is one collector's latest run.
type Run struct {
	Name     string
	Success  bool
	Duration time.Duration
}

// Pool is the pool's reading and the reserve it is judged against.
type Pool struct {
	Snapshot pool.Snapshot
	Reserve  uint64
	// LargeFreeBytes is the free memory in blocks of judge.LargeBlockBytes
	// or more; nil where buddyinfo or the page size is unknown, or the
	// kernel has no block that large.
	LargeFreeBytes *float64
	// CompactionFailuresPerSecond is compact_fail's rate over the last few
	// minutes; nil without the counter or before a rate is known.
	CompactionFailuresPerSecond *float64
	// Pressure is /proc/pressure/memory; nil without PSI.
	Pressure *pool.Pressure
}

// PoolOf is the pool part of memory read m, judged against reserve: the
// pressure kept where it has its "some" line, which the stall figures need.
func PoolOf(m pool.Memory, reserve uint64) *Pool {
	p := &Pool{Snapshot: m.Snapshot, Reserve: reserve}
	if m.Pressure != nil && m.Pressure.Some != nil {
		p.Pressure = m.Pressure
	}
	return p
}

// GPU is the gpu collector's latest reading.
type GPU struct {
	// Loaded: NVML is loaded and initialised (spark_gpu_nvml_up).
	Loaded   bool
	Snapshot readings.Snapshot
	// Stalled is how long the NVML call outstanding at the read had waited
	// (spark_gpu_nvml_stalled_seconds); 0 when none was.
	Stalled time.Duration
	// Failing: the run failed (a timeout, a device or field lost); Snapshot
	// is what did answer.
	Failing bool
}

// Thermal is the thermal sampler's snapshot and the configuration it was
// judged with.
type Thermal struct {
	Snapshot judge.ThermalSnapshot
	Config   judge.ThermalConfig
}

// Plan is one planned run of --plan.file and its peak need.
type Plan struct {
	Name      string
	PeakBytes float64
}

// Fabric is the latest two readings of the RDMA devices: a rate is the
// difference between them.
type Fabric struct {
	Latest FabricReading
	// Previous is the reading before Latest; nil until two exist.
	Previous *FabricReading
}

// FabricReading is one reading of the RDMA devices.
type FabricReading struct {
	At       time.Time
	Snapshot fabric.Snapshot
}

// Kernel is what the kernel log counted.
type Kernel struct {
	// Readable: the log could be read; Counts is empty otherwise.
	Readable bool
	Counts   kmsg.Counts
}

// Flight is the flight recorder's account of the previous boot.
type Flight struct {
	// Unclean: the previous boot, less than a day ago, ended without a clean
	// shutdown (spark_flight_last_boot_unclean); then EndedAt is its last
	// record's time and Verdict the recorder's line on its last minutes.
	Unclean bool
	EndedAt time.Time
	Verdict string
}

// Containers are where the workloads run.
type Containers struct {
	// ByPID is each workload's container (the zero Ref on the host).
	ByPID map[int]container.Ref
	// Names are the Docker Engine's names, by short ID; nil without
	// --workloads.docker-socket or when it did not answer.
	Names map[string]container.Info
}
