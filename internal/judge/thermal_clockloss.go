package judge

import (
	"slices"
	"time"
)

// What "throttled" rests on: the clocks were lost. docs/thermal.md gives
// the figures' public sources; the counters' share is ThermalSlowdownShare,
// the one SparkGPUThrottling's counter rule pages on.
const (
	// ClockFallRatio: the SM clock fell when its recent median is more
	// than this share below its level earlier in the busy stretch. A
	// healthy GB10's clock floats 2.39–2.52 GHz under steady load, ±3 %
	// around its level; 10 % is well clear of that float, and a thermal
	// fall (2.45 → 2.0 GHz) is 18 %.
	ClockFallRatio = 0.10
	// ComparablePowerWatts: an earlier block's power is comparable to
	// now's when it is at most this far below it. On a GB10 the SM clock
	// follows power (current-limited DVFS: ~2470 MHz at 60–70 W, ~2250 MHz
	// at 88–98 W, about 0.3 % per watt in djangodevreng/dgx-spark-benchmarks),
	// so a level taken at less power than now would read a power-driven
	// drop as a lost clock; 5 W costs the clock at most ~1.5 %.
	ComparablePowerWatts = 5.0
	// WarmTemperature is the temperature (°C, the recent span's mean) from
	// which a clock lost at comparable power is thermal: the GB10 driver's
	// SW thermal slowdown engages from ~80 °C (mudler/vllm.cpp's labelled
	// slowdown rows: median 82 °C; inference-atlas PR #225: a trip point
	// near 86–87 °C).
	WarmTemperature = 80.0
	// HotMargin is the driver's thermal margin (°C to its slowdown limit,
	// nvidia-smi's T.Limit) at or under which the GPU holds hot: 94 °C
	// less 88 °C, the temperature HotTemperature defaults to.
	HotMargin = 6.0
)

// Hysteresis for the clock-loss evidence: a GPU already Throttled stays
// so while the counters still grow for half the share, or the clock is
// still down by half the fall.
const (
	stayCounterFactor = 0.5 // of ThermalSlowdownShare
	stayFallFactor    = 0.5 // of ClockFallRatio
)

// RecentSpan is the span the counter share and the recent clock are taken
// over: a tenth of the window (a minute at the default), and no less than
// the gap tolerance, so that a clock level is the median of several
// samples.
func (c ThermalConfig) RecentSpan() time.Duration {
	return max(c.Window/10, c.MaxGap())
}

// counterShare is how much the thermal slowdown counters grew over the
// recent span, as a share of it; ok is false when the samples there carry
// no counter. The span is at least RecentSpan, so that one sample's
// growth right after a start is not read as a whole span of slowdown.
func counterShare(run []ThermalSample, now time.Time, cfg ThermalConfig) (share float64, ok bool) {
	span := cfg.RecentSpan()
	from := now.Add(-span)
	i := len(run) - 1
	for i > 0 && run[i].Time.After(from) {
		i-- // down to the last sample at or before the span's start
	}
	grew, ok := growth(run[i:], func(s ThermalSample) *float64 { return s.ThermalSlowdownSeconds })
	if !ok {
		return 0, false
	}
	return grew / max(now.Sub(run[i].Time), span).Seconds(), true
}

// ClockLoss is what the SM clock did over the busy stretch: the latest
// unbroken run of busy samples, which may begin before the window.
type ClockLoss struct {
	// HasClock: the busy stretch's recent samples carry the SM clock.
	HasClock bool
	// Recent is the median SM clock (Hz) over the latest RecentSpan.
	Recent float64
	// HasLevel: an earlier part of the stretch at comparable power (no
	// more than ComparablePowerWatts below now's, no more than the flat
	// spread above) gives a level to compare with; Level is the highest
	// median of its RecentSpan-long blocks.
	HasLevel bool
	Level    float64
	// LevelPower is the mean power (W) of the block that gave the level;
	// RecentPower the recent span's, RecentTemperature its mean °C.
	LevelPower, RecentPower, RecentTemperature float64
	// Since is the stretch's first sample among those held; Held says the
	// stretch reaches the oldest of them, so may have begun before.
	Since time.Time
	Held  bool
}

// Fell reports whether the recent clock is more than ratio below the
// level.
func (c ClockLoss) Fell(ratio float64) bool {
	return c.HasClock && c.HasLevel && c.Recent < (1-ratio)*c.Level
}

// clockLoss measures the busy stretch's clock. Earlier blocks at a higher
// power than now (a warm-up boost above the ~100 W cap) are left out: the
// power cap, not heat, took that clock away; so are blocks at less power
// than now, where the clock is higher because the GPU draws less current
// (ComparablePowerWatts). carried is the previous
// verdict's: a stretch longer than the samples held keeps the level it
// had, so that a clock lost for longer than that stays lost.
func clockLoss(samples []ThermalSample, now time.Time, cfg ThermalConfig, carried ClockLoss) ClockLoss {
	end := len(samples)
	for end > 0 && samples[end-1].Time.After(now) {
		end--
	}
	begin := end
	for begin > 0 && busySample(samples[begin-1], cfg) &&
		(begin == end || samples[begin].Time.Sub(samples[begin-1].Time) <= cfg.MaxGap()) {
		begin--
	}
	stretch := samples[begin:end]
	if len(stretch) == 0 || now.Sub(stretch[len(stretch)-1].Time) > cfg.MaxGap() {
		return ClockLoss{}
	}
	span := cfg.RecentSpan()
	// Blocks of span counted back from now (block 0 is the recent one):
	// contiguous runs of the stretch, each judged by the median of its
	// clocks and the mean of its power, in one reused buffer.
	buf := make([]float64, 0, len(stretch))
	block := func(from int) (next int, clocks []float64, power, temp float64) {
		k := now.Sub(stretch[from].Time) / span
		clocks = buf[:0]
		next = from
		for ; next < len(stretch) && now.Sub(stretch[next].Time)/span == k; next++ {
			power += stretch[next].Power
			temp += stretch[next].Temperature
			if c := stretch[next].SMClock; c != nil {
				clocks = append(clocks, *c)
			}
		}
		n := float64(next - from)
		return next, clocks, power / n, temp / n
	}
	recentFrom := len(stretch)
	for recentFrom > 0 && now.Sub(stretch[recentFrom-1].Time) < span {
		recentFrom--
	}
	if recentFrom == len(stretch) {
		return ClockLoss{}
	}
	_, clocks, recentPower, recentTemp := block(recentFrom)
	if len(clocks) == 0 {
		return ClockLoss{}
	}
	c := ClockLoss{HasClock: true, Recent: medianInPlace(clocks), RecentPower: recentPower, RecentTemperature: recentTemp,
		Since: stretch[0].Time, Held: begin == 0}
	floor, ceiling := recentPower-ComparablePowerWatts, recentPower+cfg.FlatSpread
	for i := 0; i < recentFrom; {
		var power float64
		i, clocks, power, _ = block(i)
		if len(clocks) == 0 || power > ceiling || power < floor {
			continue
		}
		if m := medianInPlace(clocks); !c.HasLevel || m > c.Level {
			c.HasLevel, c.Level, c.LevelPower = true, m, power
		}
	}
	sameStretch := carried.HasClock && (carried.Since.Equal(c.Since) || c.Held && !carried.Since.After(c.Since))
	if sameStretch && carried.HasLevel && carried.LevelPower <= ceiling && carried.LevelPower >= floor && (!c.HasLevel || carried.Level > c.Level) {
		c.HasLevel, c.Level, c.LevelPower = true, carried.Level, carried.LevelPower
		c.Since = carried.Since
	}
	return c
}

// busySample: one sample's share of "busy", by utilisation where NVML
// reports it, by power where it does not.
func busySample(s ThermalSample, cfg ThermalConfig) bool {
	if s.Utilization != nil {
		return *s.Utilization >= cfg.BusyUtilization
	}
	return s.Power >= cfg.BusyPower
}

// medianInPlace is the median of xs, which it sorts.
func medianInPlace(xs []float64) float64 {
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

// marginMean is the mean thermal margin over the samples that carry it;
// ok is false when none does.
func marginMean(run []ThermalSample) (mean float64, ok bool) {
	var n int
	for _, s := range run {
		if s.TemperatureMargin != nil {
			mean += *s.TemperatureMargin
			n++
		}
	}
	if n == 0 {
		return 0, false
	}
	return mean / float64(n), true
}

// judgeClocks applies the clock-loss evidence to a verdict whose parts
// are set: the counter share, the margin's "hot", and whether the
// signature is confirmed by a falling clock, held by a steady one, or
// stands alone for want of a clock. previous is the previous verdict
// (hysteresis, the clock level carried); samples are all the samples
// held, for the busy stretch.
func judgeClocks(v *ThermalVerdict, run, samples []ThermalSample, now time.Time, previous ThermalVerdict, cfg ThermalConfig) {
	share, fall := ThermalSlowdownShare, ClockFallRatio
	if previous.State == Throttled {
		share *= stayCounterFactor
		fall *= stayFallFactor
	}
	v.SlowdownShare, _ = counterShare(run, now, cfg)
	v.CounterSlowdown = v.SlowdownShare >= share

	v.Clock = clockLoss(samples, now, cfg, previous.Clock)
	v.ClockFell = v.Clock.Fell(fall)
	warm := WarmTemperature
	if previous.State == Throttled {
		warm -= stayHotMargin
	}
	v.ClockLost = v.ClockFell && (v.Clock.RecentTemperature >= warm || v.Hot)
	if v.Signature {
		v.SignatureOnly = !v.Clock.HasClock
		v.ClockHolding = v.Clock.HasClock && !v.ClockFell
	}
}

// hotByMargin is the margin's word on "hot" where the samples carry it:
// the driver knows its own limit better than a fixed temperature does.
func hotByMargin(v *ThermalVerdict, run []ThermalSample, prev ThermalState) {
	m, ok := marginMean(run)
	if !ok {
		return
	}
	limit := HotMargin
	if prev == Throttled {
		limit += stayHotMargin
	}
	v.HasMargin, v.MarginMean = true, m
	v.Hot = m <= limit
}
