package judge

import (
	"slices"
	"time"
)

// What "throttled" rests on: the clocks were lost. docs/thermal.md gives
// the figures' public sources.
const (
	// ClockFallRatio is how far below its earlier level the recent SM clock
	// must be to have fallen: a healthy GB10 floats ±3 % under steady load,
	// a thermal fall (2.45 → 2.0 GHz) is 18 %.
	ClockFallRatio = 0.10
	// ComparablePowerWatts is how far below now's power an earlier level may
	// be taken: a GB10's clock falls ~0.3 % per watt (current-limited DVFS,
	// djangodevreng/dgx-spark-benchmarks), which must not read as a loss.
	ComparablePowerWatts = 5.0
	// WarmTemperature (°C) is where a lost clock counts as thermal: GB10's
	// SW thermal slowdown engages from ~80 °C (mudler/vllm.cpp: median
	// 82 °C; inference-atlas PR #225: a trip point near 86–87 °C).
	WarmTemperature = 80.0
	// HotMargin is the thermal margin (nvidia-smi's T.Limit) at which the GPU
	// holds hot: 94 °C less HotTemperature's default 88 °C.
	HotMargin = 6.0
)

// Hysteresis for the clock-loss evidence.
const (
	stayCounterFactor = 0.5 // of ThermalSlowdownShare
	stayFallFactor    = 0.5 // of ClockFallRatio
)

// RecentSpan is the span of the counter share and the recent clock: no
// less than MaxGap, so that a clock level is a median of several samples.
func (c ThermalConfig) RecentSpan() time.Duration {
	return max(c.Window/10, c.MaxGap())
}

// counterShare is the counters' growth as a share of the recent span, at
// least RecentSpan long, so that one sample's growth right after a start
// is not read as a whole span of slowdown.
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
	// Level is the highest median of the earlier RecentSpan-long blocks at
	// comparable power.
	HasLevel bool
	Level    float64
	// Mean power (W) and temperature (°C).
	LevelPower, RecentPower, RecentTemperature float64
	// Held: the stretch reaches the oldest sample held, so may have begun
	// before Since.
	Since time.Time
	Held  bool
}

// Fell reports whether the recent clock is more than ratio below the level.
func (c ClockLoss) Fell(ratio float64) bool {
	return c.HasClock && c.HasLevel && c.Recent < (1-ratio)*c.Level
}

// clockLoss measures the busy stretch's clock. Blocks at higher power (a
// warm-up boost above the ~100 W cap: the cap, not heat, took that clock)
// and at lower power are left out. carried keeps the level of a stretch
// longer than the samples held, so that a clock lost that long stays lost.
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
	// Blocks of span counted back from now. clocks is buf, reused by each
	// block and sorted by medianInPlace.
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

// judgeClocks applies the clock-loss evidence to a verdict whose parts are
// set. samples are all those held: the busy stretch may begin before run.
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
