// Package status builds the status page of one Spark: the model that
// /api/v1/status serves as JSON and `/` renders as HTML, and the View the
// page's script refreshes it from. The model is made from the collectors'
// latest results (internal/collected), the ones /metrics rendered: it shows
// nothing /metrics would not, and costs no NVML read of its own.
//
// docs/status.md documents every field, docs/status.schema.json is its JSON
// Schema; within /api/v1 fields are added, never renamed or removed.
package status

// APIVersion is the version of the model, the v1 of /api/v1/status.
const APIVersion = "v1"

// Model is the status of one Spark at one moment.
type Model struct {
	APIVersion  string `json:"api_version"`
	GeneratedAt string `json:"generated_at"` // RFC 3339, UTC

	Exporter BuildInfo `json:"exporter"`
	// Pool is nil when the pool collector is off or failed this time.
	Pool *Pool `json:"pool"`
	NVML NVML  `json:"nvml"`
	// GPUs has one entry per GPU NVML reports, by index.
	GPUs []GPU `json:"gpus"`
	// Workloads is nil when the workloads collector is off or failed.
	Workloads *Workloads `json:"workloads"`
	// Plans is nil without --plan.file.
	Plans *Plans `json:"plans"`
	// Fabric is nil without an RDMA device, or when its collector is off or failed.
	Fabric *Fabric `json:"fabric"`
	// Flight is nil unless the flight recorder (--flight.file) found that the
	// previous boot, less than a day ago, ended without a clean shutdown.
	Flight     *Flight     `json:"flight"`
	Collectors []Collector `json:"collectors"`
}

// Flight is the flight recorder's account of a previous boot that ended
// without a clean shutdown.
type Flight struct {
	Unclean bool   `json:"unclean"`
	EndedAt string `json:"ended_at"` // RFC 3339, UTC: the boot's last record
	// Verdict is the recorder's one line on the boot's last minutes.
	Verdict string `json:"verdict"`
	State   string `json:"state"` // unclean
	Text    string `json:"text"`
}

// BuildInfo is what spark_exporter_build_info says of the running build.
type BuildInfo struct {
	Version   string `json:"version"`
	Revision  string `json:"revision"`
	GoVersion string `json:"go_version"`
}

// Pool is the unified memory pool: usable memory and its tier (the danger
// figure), the headroom for a new job (the planning figures), and one bar
// whose segments add up to the total.
type Pool struct {
	TotalBytes     int64 `json:"total_bytes"`
	FreeBytes      int64 `json:"free_bytes"`
	AvailableBytes int64 `json:"available_bytes"`
	// UsableBytes is MemAvailable − CmaFree, never below 0: what the GPU
	// driver's pinned allocations can still get. It falls with danger.
	UsableBytes int64 `json:"usable_bytes"`
	// UsableTier is ok, low or critical: UsableBytes against the tiers of
	// SparkPoolUsableLow and SparkPoolUsableCritical.
	UsableTier string `json:"usable_tier"`
	// CMAFreeBytes is CmaFree; nil where the kernel has no CMA.
	CMAFreeBytes *int64 `json:"cma_free_bytes"`

	UsedBytes               int64 `json:"used_bytes"` // total − free − page cache, free(1)'s used
	PageCacheBytes          int64 `json:"page_cache_bytes"`
	FlushableBytes          int64 `json:"flushable_bytes"`
	ReserveBytes            int64 `json:"reserve_bytes"`
	HeadroomBytes           int64 `json:"headroom_bytes"` // free − CMA free − reserve; negative below the reserve
	HeadroomAfterFlushBytes int64 `json:"headroom_after_flush_bytes"`

	Bar []Segment `json:"bar"`
	// LargeFreeBytes is the free memory in blocks of judge.LargeBlockBytes
	// or more; nil where the kernel's blocks are not known or none is that
	// large.
	LargeFreeBytes *int64 `json:"large_free_bytes"`
	// CompactionFailuresPerSecond is compact_fail's rate over the last
	// minutes; nil until known.
	CompactionFailuresPerSecond *float64 `json:"compaction_failures_per_second"`
	// State is usable_critical or usable_low when usable memory is below a
	// tier, fragmented when judge.Fragmented holds (danger); else
	// cache_holds_headroom or below_reserve when a new job needs a flush
	// first (normal with a full page cache), or ok.
	State string `json:"state"`
	Text  string `json:"text"`
	// OOMLadderStep is the ladder's first step when the cache holds the headroom.
	OOMLadderStep string `json:"oom_ladder_step"`
	// Notes are facts about the pool that call for no action now.
	Notes []string `json:"notes"`
}

// Segment is one part of the pool bar.
type Segment struct {
	Part  string `json:"part"` // used, cache, flushable, headroom, reserve, cma
	Label string `json:"label"`
	Bytes int64  `json:"bytes"`
}

// NVML is whether the exporter reads the GPUs, and why not.
type NVML struct {
	// State is up, down (no driver or library), failing (loaded, reads
	// fail), hung (an NVML call outstanding past judge.NVMLStalledSeconds)
	// or off (the gpu collector is disabled).
	State string `json:"state"`
	Text  string `json:"text"`
}

// GPU is one GPU: its latest reading and its thermal window.
type GPU struct {
	Index              int      `json:"index"`
	Name               string   `json:"name"`
	TemperatureCelsius *float64 `json:"temperature_celsius"`
	PowerWatts         *float64 `json:"power_watts"`
	SMClockHertz       *float64 `json:"sm_clock_hertz"`
	SMClockMaxHertz    *float64 `json:"sm_clock_max_hertz"`
	UtilizationRatio   *float64 `json:"utilization_ratio"`
	// ClockEvents lists the clock event reasons active now.
	ClockEvents []string `json:"clock_events"`
	// Thermal is nil when the thermal collector has no sample of this GPU.
	Thermal *Thermal `json:"thermal"`
}

// Thermal is a GPU's thermal verdict and the window behind it.
type Thermal struct {
	State            string   `json:"state"` // collecting, normal, watching, throttled
	Text             string   `json:"text"`
	Evidence         []string `json:"evidence"`
	Signature        bool     `json:"signature"`
	Episodes         int      `json:"episodes"`
	ThrottledSeconds float64  `json:"throttled_seconds"`
	Window           Window   `json:"window"`
}

// Window is the samples of the thermal window, for the charts.
type Window struct {
	Seconds         float64 `json:"seconds"`          // --thermal.window
	IntervalSeconds float64 `json:"interval_seconds"` // --thermal.interval
	NominalWatts    float64 `json:"nominal_watts"`    // --thermal.nominal-power
	PlateauWatts    float64 `json:"plateau_watts"`    // the platform's sustained cap
	// Samples are oldest first, thinned evenly to at most MaxPoints.
	Samples     []Point `json:"samples"`
	Temperature Range   `json:"temperature_celsius"`
	Power       Range   `json:"power_watts"`
	SMClock     *Range  `json:"sm_clock_hertz"` // nil when no sample has it
}

// Point is one sample of the window.
type Point struct {
	SecondsAgo         float64  `json:"seconds_ago"`
	TemperatureCelsius float64  `json:"temperature_celsius"`
	PowerWatts         float64  `json:"power_watts"`
	SMClockHertz       *float64 `json:"sm_clock_hertz"`
}

// Range is the lowest, highest and latest value of a series.
type Range struct {
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	Latest float64 `json:"latest"`
}

// Workloads is who else is on the pool, and the one-heavy-job verdict.
type Workloads struct {
	Training   int        `json:"training"`
	Inference  int        `json:"inference"`
	Unreadable int        `json:"unreadable_processes"`
	List       []Workload `json:"list"`
	// State is none, ok or contention; Text says it in words.
	State string `json:"state"`
	Text  string `json:"text"`
}

// Workload is one program on the pool.
type Workload struct {
	PID           int    `json:"pid"`
	Kind          string `json:"kind"`
	Role          string `json:"role"`
	ResidentBytes *int64 `json:"resident_bytes"`
	// Cap is the memory share the program was started with; nil if uncapped.
	Cap *Cap `json:"cap"`
	// Heavy: an inference server with no cap or a cap above judge.HeavyCapRatio.
	Heavy bool `json:"heavy"`
	Place
}

// Cap is a workload's memory cap.
type Cap struct {
	Ratio  float64 `json:"ratio"`
	Source string  `json:"source"` // flag or default
}

// Plans is the planned runs of --plan.file against the headroom.
type Plans struct {
	// TrainingRunning: a training job is on the pool now, and may be one
	// of the plans already holding its memory.
	TrainingRunning bool   `json:"training_running"`
	List            []Plan `json:"list"`
}

// Plan is one planned run.
type Plan struct {
	Name          string `json:"name"`
	RequiredBytes int64  `json:"required_bytes"`
	// State is fits (within today's headroom), fits_after_flush or
	// wont_fit; "" when the pool is not known.
	State string `json:"state"`
	Text  string `json:"text"`
}

// Fabric is the ConnectX-7 link between two Sparks, summed over its
// functions (RDMA devices).
type Fabric struct {
	PortsUp int `json:"ports_up"`
	Ports   int `json:"ports"`
	// NegotiatedBitsPerSecond sums the negotiated rates of the ports up.
	NegotiatedBitsPerSecond float64 `json:"negotiated_bits_per_second"`
	// TrafficBytesPerSecond is received plus transmitted bytes per second
	// between the collector's last two readings; nil until two exist.
	TrafficBytesPerSecond *float64 `json:"traffic_bytes_per_second"`
	// PCIe is the narrowest and slowest PCIe link of the functions, or nil.
	PCIe *PCIe `json:"pcie"`
	// State is up (a port up), degraded (a PCIe link below its maximum) or
	// none_up (no cable, or the link is down).
	State string `json:"state"`
	Text  string `json:"text"`
}

// PCIe is the lowest current PCIe width and speed among the functions, each
// beside its function's maximum; 0 when not known.
type PCIe struct {
	Width                 float64 `json:"width"`
	MaxWidth              float64 `json:"max_width"`
	TransfersPerSecond    float64 `json:"transfers_per_second"`
	MaxTransfersPerSecond float64 `json:"max_transfers_per_second"`
}

// Collector is one collector's latest run.
type Collector struct {
	Name            string  `json:"name"`
	Success         bool    `json:"success"`
	DurationSeconds float64 `json:"duration_seconds"`
}
