package judge

import (
	"math"
	"testing"
)

func TestFitOf(t *testing.T) {
	const gib = 1 << 30
	for _, tc := range []struct {
		name                           string
		required, headroom, afterFlush float64
		want                           PlanFit
	}{
		{"within the headroom", 10 * gib, 20 * gib, 30 * gib, Fits},
		{"exactly the headroom", 20 * gib, 20 * gib, 30 * gib, Fits},
		{"only after a flush", 25 * gib, 20 * gib, 30 * gib, FitsAfterFlush},
		{"beyond a flush", 31 * gib, 20 * gib, 30 * gib, wontFit},
		{"headroom negative", 1, -gib, -gib, wontFit},
		// 6.3e20 bytes wraps to MinInt64 as an int64 and would "fit".
		{"beyond any integer", 6.3e20, 20 * gib, 30 * gib, wontFit},
		{"infinite", math.Inf(1), 20 * gib, 30 * gib, wontFit},
		{"not a number", math.NaN(), 20 * gib, 30 * gib, wontFit},
	} {
		if got := FitOf(tc.required, tc.headroom, tc.afterFlush); got != tc.want {
			t.Errorf("%s: FitOf(%g, %g, %g) = %s, want %s", tc.name, tc.required, tc.headroom, tc.afterFlush, got, tc.want)
		}
	}
}

func TestFitsWithMargin(t *testing.T) {
	if !FitsWithMargin(90, 90, 100) {
		t.Error("peak 90 of 100 (11% to spare) refused")
	}
	if FitsWithMargin(95, 90, 100) {
		t.Error("peak 95 of 100 (5% to spare) accepted")
	}
	if FitsWithMargin(50, 101, 100) {
		t.Error("worst case over the budget accepted")
	}
}

func TestCacheHoldsHeadroom(t *testing.T) {
	for _, tc := range []struct {
		flushable                  float64
		below, planNeeds, training bool
		want                       bool
	}{
		{FlushWorthBytes, true, false, false, true},
		{FlushWorthBytes - 1, true, false, false, false},
		{FlushWorthBytes, false, true, false, true},
		{FlushWorthBytes, false, true, true, false},
		{FlushWorthBytes, false, false, false, false},
	} {
		if got := CacheHoldsHeadroom(tc.flushable, tc.below, tc.planNeeds, tc.training); got != tc.want {
			t.Errorf("CacheHoldsHeadroom(%g, below %v, plan %v, training %v) = %v", tc.flushable, tc.below, tc.planNeeds, tc.training, got)
		}
	}
}

func TestHeavy(t *testing.T) {
	for _, tc := range []struct {
		hasCap bool
		ratio  float64
		want   bool
	}{{false, 0, true}, {true, 0.9, true}, {true, HeavyCapRatio, false}, {true, 0.3, false}, {true, math.NaN(), true}} {
		if got := Heavy(tc.hasCap, tc.ratio); got != tc.want {
			t.Errorf("Heavy(%v, %g) = %v, want %v", tc.hasCap, tc.ratio, got, tc.want)
		}
	}
}

// The tiers against the owner's measured figures (docs/design.md): the
// healthy serving idle is ok, the trail before the kill is low or critical,
// the kill itself critical.
func TestTierOf(t *testing.T) {
	const gib = 1 << 30
	for _, tc := range []struct {
		usable float64
		want   UsableTier
	}{
		{26.12 * gib, usableOK}, // healthy serving idle
		{14.1 * gib, usableOK},  // before the fall
		{12 * gib, usableOK},    // at the tier: the alerts compare strictly
		{10.89 * gib, UsableLow},
		{8 * gib, UsableLow},
		{7.85 * gib, UsableCritical},
		{5.01 * gib, UsableCritical}, // the lowest a 60 s scrape saw
		{1.64 * gib, UsableCritical}, // kill #7
		{0, UsableCritical},
	} {
		if got := TierOf(tc.usable); got != tc.want {
			t.Errorf("TierOf(%.2f GiB) = %s, want %s", tc.usable/gib, got, tc.want)
		}
	}
}

// The published ranks: the fragmented one (no block of 32 MiB, compaction
// failing 2.2 a second) is; a fresh one (782 blocks) is not, whatever
// compaction does; a healthy full pool (20 blocks) whose khugepaged fails
// once a minute is not.
func TestFragmented(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name        string
		large, fail float64
		want        bool
	}{
		{"fragmented rank", 0, 2.2, true},
		{"five short of 200 blocks", 195 * 32 * mib, 0.2, true},
		{"200 blocks", 200 * 32 * mib, 2.2, false},
		{"fresh rank", 782 * 32 * mib, 2, false},
		{"healthy full pool", 20 * 32 * mib, 1.0 / 60, false},
		{"at the rate", 0, 0.1, false},
	} {
		if got := Fragmented(tc.large, tc.fail); got != tc.want {
			t.Errorf("%s: Fragmented(%g, %g) = %v, want %v", tc.name, tc.large, tc.fail, got, tc.want)
		}
	}
}
