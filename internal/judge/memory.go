package judge

import "math"

// PlanFit is whether a planned run fits in the pool now.
type PlanFit string

const (
	// Fits means the peak fits within the headroom (free − reserve).
	Fits PlanFit = "fits"
	// FitsAfterFlush means it fits once the page cache is flushed.
	FitsAfterFlush PlanFit = "fits_after_flush"
	// WontFit means it would OOM at load (the SparkPlannedRunWontFit rule).
	WontFit PlanFit = "wont_fit"
)

// FitOf judges a run's peak need against the headroom and the headroom
// after a flush. It compares float64s so that a need beyond any integer
// type is WontFit, never wrapped into a negative that fits.
func FitOf(required, headroom, afterFlush float64) PlanFit {
	switch {
	case math.IsNaN(required):
		return WontFit
	case required <= headroom:
		return Fits
	case required <= afterFlush:
		return FitsAfterFlush
	}
	return WontFit
}

// PlanSpareRatio is the margin a plan should leave above its peak.
const PlanSpareRatio = 0.10

// FitsWithMargin is whether a run's peak fits budget with PlanSpareRatio
// to spare and its worst case (activations doubled, or the load transient)
// fits at all.
func FitsWithMargin(peak, worst, budget float64) bool {
	return peak*(1+PlanSpareRatio) <= budget && worst <= budget
}

// FlushWorthIt is whether flushable page cache is worth a flush.
func FlushWorthIt(flushableBytes float64) bool { return flushableBytes >= FlushWorthBytes }

// CacheHoldsHeadroom is the SparkPageCacheHoldingHeadroom judgement. With
// training running, a plan that needs a flush may be that training itself.
func CacheHoldsHeadroom(flushableBytes float64, belowReserve, planNeedsFlush, training bool) bool {
	return FlushWorthIt(flushableBytes) && (belowReserve || planNeedsFlush && !training)
}

// Heavy is whether an inference server counts as heavy beside training
// (the SparkConcurrentHeavyWorkloads rule).
func Heavy(hasCap bool, capRatio float64) bool { return !hasCap || !(capRatio <= HeavyCapRatio) }

// UsableTier is usable memory's tier, as the SparkPoolUsableLow and
// SparkPoolUsableCritical alerts judge it.
type UsableTier string

const (
	UsableOK       UsableTier = "ok"
	UsableLow      UsableTier = "low"      // below UsableLowBytes
	UsableCritical UsableTier = "critical" // below UsableCriticalBytes
)

// TierOf judges usable bytes strictly below each tier, as the alerts do.
func TierOf(usable float64) UsableTier {
	switch {
	case usable < UsableCriticalBytes:
		return UsableCritical
	case usable < UsableLowBytes:
		return UsableLow
	}
	return UsableOK
}

// Fragmented is the SparkPoolFragmented judgement: little free memory in
// blocks of LargeBlockBytes or more while compaction keeps failing.
func Fragmented(largeFreeBytes, compactionFailuresPerSecond float64) bool {
	return largeFreeBytes < FragmentedBelowBytes && compactionFailuresPerSecond > CompactionFailuresPerSecond
}
