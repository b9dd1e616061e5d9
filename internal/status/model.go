// Package status builds the status page of one Spark from the collectors'
// latest results, the ones /metrics rendered: it shows nothing /metrics would
// not, and costs no NVML read of its own. docs/status.md documents every
// field; within /api/v1 fields are added, never renamed or removed.
package status

const APIVersion = "v1"

// Model is the status of one Spark at one moment.
type Model struct {
	APIVersion  string `json:"api_version"`
	GeneratedAt string `json:"generated_at"` // RFC 3339, UTC

	Exporter   BuildInfo   `json:"exporter"`
	Pool       *Pool       `json:"pool"`
	NVML       NVML        `json:"nvml"`
	GPUs       []GPU       `json:"gpus"`
	Workloads  *Workloads  `json:"workloads"`
	Plans      *Plans      `json:"plans"`
	Fabric     *Fabric     `json:"fabric"`
	Flight     *Flight     `json:"flight"`
	Collectors []Collector `json:"collectors"`
}

// Flight is nil unless a previous boot, less than a day ago, ended without a clean shutdown.
type Flight struct {
	Unclean bool   `json:"unclean"`
	EndedAt string `json:"ended_at"` // RFC 3339, UTC: the boot's last record
	Verdict string `json:"verdict"`
	State   string `json:"state"` // unclean
	Text    string `json:"text"`
}

type BuildInfo struct {
	Version   string `json:"version"`
	Revision  string `json:"revision"`
	GoVersion string `json:"go_version"`
}

// Pool's bar segments add up to the total.
type Pool struct {
	TotalBytes     int64  `json:"total_bytes"`
	FreeBytes      int64  `json:"free_bytes"`
	AvailableBytes int64  `json:"available_bytes"`
	UsableBytes    int64  `json:"usable_bytes"`
	UsableTier     string `json:"usable_tier"`
	CMAFreeBytes   *int64 `json:"cma_free_bytes"`

	UsedBytes               int64 `json:"used_bytes"` // total − free − page cache, free(1)'s used
	PageCacheBytes          int64 `json:"page_cache_bytes"`
	FlushableBytes          int64 `json:"flushable_bytes"`
	ReserveBytes            int64 `json:"reserve_bytes"`
	HeadroomBytes           int64 `json:"headroom_bytes"` // free − CMA free − reserve; negative below the reserve
	HeadroomAfterFlushBytes int64 `json:"headroom_after_flush_bytes"`

	Bar                         []Segment `json:"bar"`
	LargeFreeBytes              *int64    `json:"large_free_bytes"`
	CompactionFailuresPerSecond *float64  `json:"compaction_failures_per_second"`
	State                       string    `json:"state"`
	Text                        string    `json:"text"`
	OOMLadderStep               string    `json:"oom_ladder_step"`
	Notes                       []string  `json:"notes"`
}

type Segment struct {
	Part  string `json:"part"` // used, cache, flushable, headroom, reserve, cma
	Label string `json:"label"`
	Bytes int64  `json:"bytes"`
}

type NVML struct {
	State string `json:"state"`
	Text  string `json:"text"`
}

type GPU struct {
	Index              int      `json:"index"`
	Name               string   `json:"name"`
	TemperatureCelsius *float64 `json:"temperature_celsius"`
	PowerWatts         *float64 `json:"power_watts"`
	SMClockHertz       *float64 `json:"sm_clock_hertz"`
	SMClockMaxHertz    *float64 `json:"sm_clock_max_hertz"`
	UtilizationRatio   *float64 `json:"utilization_ratio"`
	ClockEvents        []string `json:"clock_events"`
	Thermal            *Thermal `json:"thermal"`
}

type Thermal struct {
	State            string   `json:"state"` // collecting, normal, watching, throttled
	Text             string   `json:"text"`
	Evidence         []string `json:"evidence"`
	Signature        bool     `json:"signature"`
	Episodes         int      `json:"episodes"`
	ThrottledSeconds float64  `json:"throttled_seconds"`
	Window           Window   `json:"window"`
}

type Window struct {
	Seconds         float64 `json:"seconds"`          // --thermal.window
	IntervalSeconds float64 `json:"interval_seconds"` // --thermal.interval
	NominalWatts    float64 `json:"nominal_watts"`    // --thermal.nominal-power
	PlateauWatts    float64 `json:"plateau_watts"`    // the platform's sustained cap
	Samples         []Point `json:"samples"`
	Temperature     Range   `json:"temperature_celsius"`
	Power           Range   `json:"power_watts"`
	SMClock         *Range  `json:"sm_clock_hertz"` // nil when no sample has it
}

type Point struct {
	SecondsAgo         float64  `json:"seconds_ago"`
	TemperatureCelsius float64  `json:"temperature_celsius"`
	PowerWatts         float64  `json:"power_watts"`
	SMClockHertz       *float64 `json:"sm_clock_hertz"`
}

type Range struct {
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	Latest float64 `json:"latest"`
}

type Workloads struct {
	Training   int        `json:"training"`
	Inference  int        `json:"inference"`
	Unreadable int        `json:"unreadable_processes"`
	List       []Workload `json:"list"`
	State      string     `json:"state"`
	Text       string     `json:"text"`
}

type Workload struct {
	PID           int    `json:"pid"`
	Kind          string `json:"kind"`
	Role          string `json:"role"`
	ResidentBytes *int64 `json:"resident_bytes"`
	Cap           *Cap   `json:"cap"`
	Heavy         bool   `json:"heavy"`
	Place
}

type Cap struct {
	Ratio  float64 `json:"ratio"`
	Source string  `json:"source"` // flag or default
}

type Plans struct {
	TrainingRunning bool   `json:"training_running"`
	List            []Plan `json:"list"`
}

type Plan struct {
	Name          string `json:"name"`
	RequiredBytes int64  `json:"required_bytes"`
	State         string `json:"state"`
	Text          string `json:"text"`
}

// Fabric sums the ConnectX-7 link's functions (RDMA devices).
type Fabric struct {
	PortsUp                 int      `json:"ports_up"`
	Ports                   int      `json:"ports"`
	NegotiatedBitsPerSecond float64  `json:"negotiated_bits_per_second"`
	TrafficBytesPerSecond   *float64 `json:"traffic_bytes_per_second"`
	PCIe                    *PCIe    `json:"pcie"`
	State                   string   `json:"state"`
	Text                    string   `json:"text"`
}

// PCIe is the lowest current width and speed among the functions; 0 when not known.
type PCIe struct {
	Width                 float64 `json:"width"`
	MaxWidth              float64 `json:"max_width"`
	TransfersPerSecond    float64 `json:"transfers_per_second"`
	MaxTransfersPerSecond float64 `json:"max_transfers_per_second"`
}

type Collector struct {
	Name            string  `json:"name"`
	Success         bool    `json:"success"`
	DurationSeconds float64 `json:"duration_seconds"`
}
