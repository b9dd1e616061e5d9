package judge

import "math"

// PlanFit is whether a planned run fits in the pool now.
type PlanFit string

const (
	Fits           PlanFit = "fits" // within the headroom (free − reserve)
	FitsAfterFlush PlanFit = "fits_after_flush"
	wontFit        PlanFit = "wont_fit"
)

// FitOf judges a run's peak need against the headroom now and after a flush,
// in float64 so that a need beyond any integer type is wontFit, never wrapped.
func FitOf(required, headroom, afterFlush float64) PlanFit {
	switch {
	case math.IsNaN(required):
		return wontFit
	case required <= headroom:
		return Fits
	case required <= afterFlush:
		return FitsAfterFlush
	}
	return wontFit
}

const PlanSpareRatio = 0.10

// FitsWithMargin: the peak fits with PlanSpareRatio to spare and the worst
// case (activations doubled, or the load transient) fits at all.
func FitsWithMargin(peak, worst, budget float64) bool {
	return peak*(1+PlanSpareRatio) <= budget && worst <= budget
}

func flushWorthIt(flushableBytes float64) bool { return flushableBytes >= FlushWorthBytes }

// CacheHoldsHeadroom: with training running, a plan that needs a flush may be that training itself.
func CacheHoldsHeadroom(flushableBytes float64, belowReserve, planNeedsFlush, training bool) bool {
	return flushWorthIt(flushableBytes) && (belowReserve || planNeedsFlush && !training)
}

func Heavy(hasCap bool, capRatio float64) bool { return !hasCap || !(capRatio <= HeavyCapRatio) }

// UsableTier is usable memory's tier, as the SparkPoolUsable* alerts judge it.
type UsableTier string

const (
	usableOK       UsableTier = "ok"
	UsableLow      UsableTier = "low"      // below UsableLowBytes
	UsableCritical UsableTier = "critical" // below UsableCriticalBytes
)

func TierOf(usable float64) UsableTier {
	switch {
	case usable < UsableCriticalBytes:
		return UsableCritical
	case usable < UsableLowBytes:
		return UsableLow
	}
	return usableOK
}

func Fragmented(largeFreeBytes, compactionFailuresPerSecond float64) bool {
	return largeFreeBytes < FragmentedBelowBytes && compactionFailuresPerSecond > CompactionFailuresPerSecond
}
