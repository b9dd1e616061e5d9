// Package judge holds the judgements about a DGX Spark that every view shares
// (the thermal one stepped over time, live or over a log), and their thresholds;
// it does no I/O. docs/design.md gives the sources, and
// rules/thresholds_test.go checks the alert rules' numbers against these.
package judge

// Power (NVML's power draw of the GB10's GPU), in watts unless named.
const (
	// RatingWatts is the power brick's rating.
	RatingWatts = 240.0

	// PlateauWatts is the GB10's sustained draw under load, the platform's own cap.
	PlateauWatts = 100.0

	PlateauLowWatts  = 80.0
	PlateauHighWatts = 120.0

	// PlateauSpreadWatts is the most (max − min) a flat plateau's power moves.
	PlateauSpreadWatts = 15.0

	// PowerCapShare is the share of time the SW power cap counter must grow to
	// hold a busy GPU: real units float their clock with the flags clear.
	PowerCapShare = 0.5

	// StuckLowWatts is the mean power under which a busy GPU is stuck (a failed
	// USB-PD negotiation); it also bounds the power-cap plateau, so the two never overlap.
	StuckLowWatts = 45.0

	// StuckLowClockRatio is the share of the maximum SM clock under which a
	// busy, low-power GPU is stuck rather than memory-bound.
	StuckLowClockRatio = 0.5

	BusyUtilizationRatio = 0.7
)

// ThermalSlowdownShare is the share of time in SW+HW thermal slowdown that
// counts as throttling: 3 s a minute, above a healthy unit's 0.9 s in all at
// 81 °C (ollama/ollama#13552).
const ThermalSlowdownShare = 0.05

// Memory (the one unified CPU+GPU pool).
const (
	// HeavyCapRatio is the largest memory cap for an inference server beside
	// training: two heavy jobs on the one pool evict each other without an OOM.
	HeavyCapRatio = 0.5

	FlushWorthBytes     = 4 << 30
	DefaultReserveBytes = 4 << 30

	// Tiers of usable memory (MemAvailable − CmaFree): below 8 GiB a kill is
	// minutes away, so the critical alert holds for about a minute only.
	UsableLowBytes      = 12 << 30
	UsableCriticalBytes = 8 << 30

	PressureStallShare = 0.05
	RefaultsPerSecond  = 1000.0 // about 4 MB/s with 4 KiB pages

	// ExhaustionFloorBytes is the usable memory SparkPoolExhaustionImminent warns of ten minutes ahead.
	ExhaustionFloorBytes = 5 << 30
)

// Fragmentation: free memory that is not contiguous.
const (
	LargeBlockBytes = 32 << 20

	// LargeBlocksWanted counts LargeBlockBytes blocks; larger blocks count in proportion.
	LargeBlocksWanted    = 200
	FragmentedBelowBytes = LargeBlocksWanted * LargeBlockBytes

	// CompactionFailuresPerSecond stays far above khugepaged's retries (one a
	// minute after a failure).
	CompactionFailuresPerSecond = 0.1
)

const (
	// PowerLimitShare of a firmware limit (PL1, SysPL1) counts as held: the
	// 100 ms loop settles just under its cap.
	PowerLimitShare = 0.95

	// CollectorFailingShare is the share of scrapes a collector must succeed
	// in, so that flapping counts as failing but one miss does not.
	CollectorFailingShare = 0.5
)

// The ConnectX-7 link between two Sparks.
const (
	// FabricFunctionsPerPort is how many PCIe functions (rails) a QSFP port shows as.
	FabricFunctionsPerPort = 2

	// FabricTransferBytesPerSecond (1 Gb/s) separates a transfer from background traffic.
	FabricTransferBytesPerSecond = 125e6

	// FabricRailImbalanceRatio is the share of its twin's throughput under which
	// a rail is stuck or unused; healthy twins differ by a few percent.
	FabricRailImbalanceRatio = 0.25
)

// A driver that does not answer, an engine that does not progress.
const (
	// NVMLStalledSeconds is how long an NVML call must have waited to count as
	// hung, not slow (a slow one takes 6 s).
	NVMLStalledSeconds = 30.0

	// StalledEngineWatts is the GPU power under which an engine holding running
	// requests that generates nothing is deadlocked.
	StalledEngineWatts = 35.0
)

// XidPages reports whether an NVRM Xid code pages: NVIDIA's Xid catalogue
// resolves these with a GPU reset or a reboot, or the GPU is gone.
func XidPages(code int) bool {
	switch code {
	case 46, 48, 62, 64, 74, 79, 95, 119, 120, 140, 154:
		return true
	}
	return false
}
