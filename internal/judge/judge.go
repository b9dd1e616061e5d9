// Package judge owns every judgement the exporter, its alert rules, the
// status page, `plan` and `report` make about a DGX Spark, and every
// threshold those judgements use. Plain values in, plain verdicts out, time
// as an argument: no I/O, no NVML, no logging, so that each view calls the
// same code and a threshold lives in one place.
//
// rules/spark.rules.yml cannot import Go; rules/thresholds_test.go parses its
// PromQL and checks each threshold number against the constants here.
// docs/design.md gives the facts behind each figure with their public
// sources.
package judge

// Power (NVML's power draw of the GB10's GPU).
const (
	// RatingWatts is the DGX Spark power brick's rating, 240 W (NVIDIA's DGX
	// Spark specification). Throttling shows as power flat below it.
	RatingWatts = 240.0

	// PlateauWatts is the GB10's sustained draw under load, about 100 W: the
	// platform's own cap, not a fault (87–89 W at 2424–2483 MHz in
	// Blackwellboy/model-serving-minefield; docs/design.md).
	PlateauWatts = 100.0

	// PlateauLowWatts and PlateauHighWatts bound "at the ~100 W plateau"
	// for a GPU whose power is flat: the SparkGPUPowerPlateau rule, the
	// report's time at the plateau and the status page's power chart
	// all use this band.
	PlateauLowWatts  = 80.0
	PlateauHighWatts = 120.0

	// PlateauSpreadWatts is the most a busy GPU's power may move (max − min
	// over the window) and still count as held flat at the plateau.
	PlateauSpreadWatts = 15.0

	// PowerCapShare is the share of time the SW power cap counter must grow
	// for a busy GPU to count as held by the platform's cap even when its
	// power is not flat (real units float their clock against the package
	// budget with the flags clear; ollama/ollama#13552).
	PowerCapShare = 0.5

	// StuckLowWatts is the mean power under which a busy GPU is far below
	// the plateau: a unit stuck after a failed USB-PD negotiation with its
	// brick drew 5.8–19.5 W while 96% busy (docs/design.md). It is also the
	// lower bound of the power-cap form of the plateau, so that the two
	// judgements never overlap.
	StuckLowWatts = 45.0

	// StuckLowClockRatio is the share of its maximum SM clock under which a
	// busy, low-power GPU is stuck rather than memory-bound: the stuck unit
	// ran 481–858 MHz against ~2.4–3 GHz, a memory-bound decode keeps
	// ~2.4 GHz.
	StuckLowClockRatio = 0.5

	// BusyUtilizationRatio is the mean GPU utilisation from which the alert
	// rules count a GPU as busy (the plateau and stuck-low rules).
	BusyUtilizationRatio = 0.7
)

// Thermal slowdown.
const (
	// ThermalSlowdownShare is the share of time in thermal slowdown (NVML's
	// SW and HW thermal slowdown counters together) that counts as
	// throttling: 5% is 3 s a minute, above the brief slowdowns a healthy
	// unit shows at a temperature peak (0.9 s in all on a unit at 81 °C,
	// ollama/ollama#13552).
	ThermalSlowdownShare = 0.05
)

// Memory (the one unified CPU+GPU pool).
const (
	// HeavyCapRatio is the largest memory cap at which an inference server
	// may run beside a training job (vLLM --gpu-memory-utilization, SGLang
	// --mem-fraction-static): two heavy jobs on the one pool evict each
	// other's pages without an OOM (docs/design.md).
	HeavyCapRatio = 0.5

	// FlushWorthBytes is the least flushable page cache worth a flush (step
	// 1 of the OOM ladder): below 4 GiB a flush gives back too little to
	// change what fits.
	FlushWorthBytes = 4 << 30

	// DefaultReserveBytes is --pool.reserve's default: the memory kept back
	// for the OS and the driver, so headroom is MemFree minus it.
	DefaultReserveBytes = 4 << 30

	// UsableLowBytes and UsableCriticalBytes are the tiers of usable memory
	// (MemAvailable − CmaFree), the gauge that falls with danger. A vLLM
	// Spark's owner measured 26–30 GiB at a healthy serving idle and
	// 1.6 GiB at the instant of two global OOM kills; in the minutes before
	// one it read 5.0–10.9 GiB at 2-minute samples, having fallen 14.1 →
	// 8.85 GiB in 2–4 minutes (docs/design.md). Below 12 GiB the engine's
	// peak is nearing the pool: a warning, with the healthy idle more than
	// twice above it. Below 8 GiB a kill is minutes away: critical, held
	// about a minute only, since 1.6 GiB is below anything a 60 s scrape
	// saw (its lowest was 5.01) and a 5-minute hold burns the lead time.
	// The owner's watchdog and alert rules use the same two tiers.
	UsableLowBytes      = 12 << 30
	UsableCriticalBytes = 8 << 30

	// PressureStallShare is the share of wall-clock time in PSI "full"
	// memory stall from which the pool counts as thrashing.
	PressureStallShare = 0.05

	// RefaultsPerSecond is the rate of evicted pages read back from which
	// the pool counts as thrashing (about 4 MB/s with 4 KiB pages).
	RefaultsPerSecond = 1000.0
)

// Firmware limits and the exporter's own health.
const (
	// PowerLimitShare is the share of a firmware power limit (PL1, SysPL1)
	// from which system power counts as held at the limit: 95% allows for
	// the controller's 100 ms loop settling just under its cap.
	PowerLimitShare = 0.95

	// CollectorFailingShare is the share of scrapes a collector must
	// succeed in: one that fails in more than half of them is failing,
	// flapping included, while one failed scrape is not.
	CollectorFailingShare = 0.5
)

// The ConnectX-7 link between two Sparks (the fabric collector). Each QSFP
// port is two PCIe functions carrying about half of its 200 Gb/s each
// (docs/design.md: ~92.6 and ~97.3 Gb/s in ib_write_bw).
const (
	// FabricFunctionsPerPort is how many PCIe functions (RDMA devices) a
	// Spark's QSFP port shows as: the rails judged against each other.
	FabricFunctionsPerPort = 2

	// FabricTransferBytesPerSecond is the throughput of a function, 1 Gb/s,
	// from which the link counts as carrying a transfer rather than
	// background traffic: a healthy rail carries about 90 times more.
	FabricTransferBytesPerSecond = 125e6

	// FabricRailImbalanceRatio: during a transfer, one rail carrying under
	// this share of its twin's throughput is stuck or unused (NCCL given
	// one function); healthy twins differ by a few percent.
	FabricRailImbalanceRatio = 0.25
)
