package judge

import "math"

// PlanFit is whether a planned run fits in the pool now.
type PlanFit string

const (
	// Fits: the run's peak fits within the headroom (free − reserve).
	Fits PlanFit = "fits"
	// FitsAfterFlush: it fits only once the page cache is flushed (step 1
	// of the OOM ladder).
	FitsAfterFlush PlanFit = "fits_after_flush"
	// WontFit: it exceeds the headroom even after a flush; it would OOM at
	// load. The SparkPlannedRunWontFit rule is this judgement.
	WontFit PlanFit = "wont_fit"
)

// FitOf judges a run whose peak need is required bytes against the pool's
// headroom and headroom after a flush. The figures are float64, as the
// exposition and the estimate give them, and are compared as such: a need
// far beyond any integer type (6.3e20 bytes) is WontFit, never wrapped
// into a negative that fits. A need that is not a number is WontFit.
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

// PlanSpareRatio is the margin a plan should leave above its peak: a
// fit with less than 10% to spare is a warning in `plan`.
const PlanSpareRatio = 0.10

// FitsWithMargin is whether a run fits budget bytes with the margin a plan
// should leave: its peak with PlanSpareRatio to spare, and worst (the
// steady state with its activations doubled, or the load transient) within
// budget.
func FitsWithMargin(peak, worst, budget float64) bool {
	return peak*(1+PlanSpareRatio) <= budget && worst <= budget
}

// FlushWorthIt is whether flushable page cache is enough to be worth a
// flush (FlushWorthBytes).
func FlushWorthIt(flushableBytes float64) bool { return flushableBytes >= FlushWorthBytes }

// CacheHoldsHeadroom is the SparkPageCacheHoldingHeadroom judgement: a
// flush is worth it while free memory is below the reserve, or while a
// planned run fits only after a flush and no training job runs (that run
// may be the plan itself).
func CacheHoldsHeadroom(flushableBytes float64, belowReserve, planNeedsFlush, training bool) bool {
	return FlushWorthIt(flushableBytes) && (belowReserve || planNeedsFlush && !training)
}

// Heavy is whether an inference server counts as a heavy job beside
// training: no memory cap (hasCap false) or a cap above HeavyCapRatio
// (the SparkConcurrentHeavyWorkloads rule).
func Heavy(hasCap bool, capRatio float64) bool { return !hasCap || !(capRatio <= HeavyCapRatio) }

// UsableTier is how usable memory (MemAvailable − CmaFree) stands against
// the tiers of the SparkPoolUsableLow and SparkPoolUsableCritical alerts.
type UsableTier string

const (
	UsableOK       UsableTier = "ok"
	UsableLow      UsableTier = "low"      // below UsableLowBytes
	UsableCritical UsableTier = "critical" // below UsableCriticalBytes
)

// TierOf judges usable bytes against UsableLowBytes and
// UsableCriticalBytes, as the alerts compare them (strictly below).
func TierOf(usable float64) UsableTier {
	switch {
	case usable < UsableCriticalBytes:
		return UsableCritical
	case usable < UsableLowBytes:
		return UsableLow
	}
	return UsableOK
}
