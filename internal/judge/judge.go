// Package judge holds every judgement the exporter, its alert rules, the
// status page, `plan` and `report` make about a DGX Spark, and their
// thresholds. It does no I/O, so that every view calls the same code.
//
// rules/spark.rules.yml cannot import Go: rules/thresholds_test.go checks
// its numbers against these constants. docs/design.md gives their sources.
package judge

// Power (NVML's power draw of the GB10's GPU).
const (
	// RatingWatts is the power brick's rating (NVIDIA's DGX Spark specification).
	RatingWatts = 240.0

	// PlateauWatts is the GB10's sustained draw under load, the platform's
	// own cap (87–89 W in Blackwellboy/model-serving-minefield).
	PlateauWatts = 100.0

	// PlateauLowWatts and PlateauHighWatts bound "at the ~100 W plateau".
	PlateauLowWatts  = 80.0
	PlateauHighWatts = 120.0

	// PlateauSpreadWatts is the most (max − min) a busy GPU's power may move
	// and still count as flat at the plateau.
	PlateauSpreadWatts = 15.0

	// PowerCapShare is the share of time the SW power cap counter must grow
	// for a busy GPU with unflat power to count as held by the cap: real
	// units float their clock with the flags clear (ollama/ollama#13552).
	PowerCapShare = 0.5

	// StuckLowWatts is the mean power under which a busy GPU is stuck: a
	// unit after a failed USB-PD negotiation drew 5.8–19.5 W at 96% busy.
	// It also bounds the power-cap plateau, so the two never overlap.
	StuckLowWatts = 45.0

	// StuckLowClockRatio is the share of its maximum SM clock under which a
	// busy, low-power GPU is stuck, not memory-bound: the stuck unit ran
	// 481–858 MHz; a memory-bound decode keeps ~2.4 GHz.
	StuckLowClockRatio = 0.5

	// BusyUtilizationRatio is the mean utilisation from which the alert
	// rules count a GPU as busy.
	BusyUtilizationRatio = 0.7
)

// Thermal slowdown.
const (
	// ThermalSlowdownShare is the share of time in SW+HW thermal slowdown
	// that counts as throttling: 3 s a minute, above a healthy unit's
	// peaks (0.9 s in all at 81 °C, ollama/ollama#13552).
	ThermalSlowdownShare = 0.05
)

// Memory (the one unified CPU+GPU pool).
const (
	// HeavyCapRatio is the largest memory cap (vLLM
	// --gpu-memory-utilization, SGLang --mem-fraction-static) for an
	// inference server beside training: two heavy jobs on the one pool
	// evict each other's pages without an OOM.
	HeavyCapRatio = 0.5

	// FlushWorthBytes is the least flushable page cache worth a flush:
	// less gives back too little to change what fits.
	FlushWorthBytes = 4 << 30

	// DefaultReserveBytes is --pool.reserve's default, kept back for the OS
	// and the driver.
	DefaultReserveBytes = 4 << 30

	// UsableLowBytes and UsableCriticalBytes are the tiers of usable memory
	// (MemAvailable − CmaFree). A vLLM Spark measured 26–30 GiB at a healthy
	// idle, 5.0–10.9 GiB in the minutes before a global OOM kill and 1.6 GiB
	// at it (docs/design.md): below 8 GiB a kill is minutes away, so the
	// critical alert holds for about a minute only.
	UsableLowBytes      = 12 << 30
	UsableCriticalBytes = 8 << 30

	// PressureStallShare is the share of time in PSI "full" memory stall
	// from which the pool counts as thrashing.
	PressureStallShare = 0.05

	// RefaultsPerSecond is the rate of evicted pages read back from which
	// the pool counts as thrashing (about 4 MB/s with 4 KiB pages).
	RefaultsPerSecond = 1000.0

	// ExhaustionFloorBytes is the usable memory SparkPoolExhaustionImminent
	// warns of ten minutes ahead: the measured kill's last samples wandered
	// through 5.01–6.24 GiB before it died at 1.6.
	ExhaustionFloorBytes = 5 << 30
)

// Fragmentation: free memory that is not contiguous. A GB10 rank failed
// its driver's allocations with ~118 GiB MemAvailable and no free block of
// 32 MiB; freshly rebooted it had 782 (FujitsuPolycom/sparkring#173).
const (
	// LargeBlockBytes is the block size the driver's large allocations
	// were seen to need.
	LargeBlockBytes = 32 << 20

	// LargeBlocksWanted is the count of such blocks that project's
	// preflight asks for before a model load; larger blocks count in
	// proportion, so the pool is short below FragmentedBelowBytes.
	LargeBlocksWanted    = 200
	FragmentedBelowBytes = LargeBlocksWanted * LargeBlockBytes

	// CompactionFailuresPerSecond is the rate of failed compactions from
	// which allocations count as failing to find contiguous memory: the
	// fragmented ranks averaged 1.3 and 2.2 a second over their week;
	// khugepaged, retrying a minute after a failure, stays far below.
	CompactionFailuresPerSecond = 0.1
)

// Firmware limits and the exporter's own health.
const (
	// PowerLimitShare is the share of a firmware power limit (PL1, SysPL1)
	// that counts as held at it: the 100 ms loop settles just under its cap.
	PowerLimitShare = 0.95

	// CollectorFailingShare is the share of scrapes a collector must
	// succeed in, so that flapping counts as failing but one miss does not.
	CollectorFailingShare = 0.5
)

// The ConnectX-7 link between two Sparks. Each QSFP port is two PCIe
// functions carrying about half its 200 Gb/s (~92.6 and ~97.3 Gb/s in
// ib_write_bw, docs/design.md).
const (
	// FabricFunctionsPerPort is how many PCIe functions (rails) a QSFP port shows as.
	FabricFunctionsPerPort = 2

	// FabricTransferBytesPerSecond is a function's throughput (1 Gb/s) from
	// which it carries a transfer, not background traffic.
	FabricTransferBytesPerSecond = 125e6

	// FabricRailImbalanceRatio is the share of its twin's throughput under
	// which a rail is stuck or unused (NCCL given one function); healthy
	// twins differ by a few percent.
	FabricRailImbalanceRatio = 0.25
)

// A driver that does not answer, an engine that does not progress: both
// look alive to the usual checks (the host pings, /health answers, NVML's
// utilisation reads busy).
const (
	// NVMLStalledSeconds is how long an NVML call must have waited to count
	// as hung, not slow: calls answer in milliseconds, a slow one in 6 s,
	// while a wedged GB10's nvidia-smi blocked 491–737 s.
	NVMLStalledSeconds = 30.0

	// StalledEngineWatts is the GPU power under which an engine that holds
	// running requests and generates nothing is deadlocked: the deadlocked
	// vLLM drew 16–27 W at ~95 % utilisation, a serving engine ~45 W
	// swinging to ~90 W, a long prefill ~46 W.
	StalledEngineWatts = 35.0
)

// XidPages reports whether an NVRM Xid code pages (SparkGPUXidError at
// critical): NVIDIA's Xid catalogue resolves these with a GPU reset or a
// node reboot, or they mean the GPU is gone (docs/runbooks.md#sparkgpuxiderror).
func XidPages(code int) bool {
	switch code {
	case 46, 48, 62, 64, 74, 79, 95, 119, 120, 140, 154:
		return true
	}
	return false
}
