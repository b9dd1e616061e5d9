package judge

import (
	"cmp"
	"math"
	"slices"
	"time"
)

// docs/thermal.md gives these figures' public sources.
const (
	// ClockFallRatio: a healthy GB10 floats ±3 %, a thermal fall is 18 %.
	ClockFallRatio = 0.10
	// comparablePowerWatts: the clock falls ~0.3 % per watt, which must not read as a loss.
	comparablePowerWatts = 5.0
	// warmTemperature (°C): SW thermal slowdown engages from ~80 °C.
	warmTemperature = 80.0
	// HotMargin (T.Limit, °C) is 94 °C less HotTemperature's default 88 °C.
	HotMargin = 6.0
)

const (
	stayCounterFactor = 0.5 // of ThermalSlowdownShare
	stayFallFactor    = 0.5 // of ClockFallRatio
)

// recentSpan is no less than MaxGap, so that a clock level is a median of several samples.
func (c ThermalConfig) recentSpan() time.Duration {
	return max(c.Window/10, c.MaxGap())
}

// counterShare spans at least recentSpan, so that one sample's growth right
// after a start is not read as a whole span of slowdown.
func counterShare(run []ThermalSample, now time.Time, cfg ThermalConfig) (share float64, ok bool) {
	span := cfg.recentSpan()
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

// ClockLoss is what the SM clock did over the latest unbroken run of samples,
// through idle dips shorter than a window.
type ClockLoss struct {
	HasClock bool
	// Recent is the median SM clock (Hz) over the busy stretch's latest recentSpan.
	Recent float64
	// Level is the highest median of earlier recentSpan blocks at comparable power.
	HasLevel                                   bool
	Level                                      float64
	LevelPower, RecentPower, RecentTemperature float64

	// levels holds, per watt, the run's highest block median, so that a level
	// outlives the samples held. Verdicts share it: replaced, never written in place.
	levels []clockLevel
	since  time.Time // the run's first sample
	busyAt time.Time // the latest busy sample
}

type clockLevel struct {
	watt         int
	power, clock float64
}

// maxClockLevels: one a watt, beyond any GPU's draw.
const maxClockLevels = 1024

func (c ClockLoss) fell(ratio float64) bool {
	return c.HasClock && c.HasLevel && c.Recent < (1-ratio)*c.Level
}

// clockLoss leaves out blocks at higher power (a warm-up boost above the cap:
// the cap, not heat, took that clock) and at lower power. carried's levels go on while the run does.
func clockLoss(samples []ThermalSample, now time.Time, cfg ThermalConfig, carried ClockLoss) ClockLoss {
	run := unbroken(samples, now, cfg.MaxGap())
	if len(run) == 0 {
		return ClockLoss{}
	}
	c := carried.continued(run[0].Time, run[0].Time.Equal(samples[0].Time), now, cfg.Window)
	begin := len(run)
	for begin > 0 && busySample(run[begin-1], cfg) {
		begin--
	}
	stretch := run[begin:]
	if len(stretch) == 0 {
		return c
	}
	c.busyAt = stretch[len(stretch)-1].Time
	span := cfg.recentSpan()
	// clocks is buf, reused by each block and sorted by medianInPlace.
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
		return c
	}
	_, clocks, recentPower, recentTemp := block(recentFrom)
	if len(clocks) == 0 {
		return c
	}
	c.HasClock, c.Recent, c.RecentPower, c.RecentTemperature = true, medianInPlace(clocks), recentPower, recentTemp
	floor, ceiling := recentPower-comparablePowerWatts, recentPower+cfg.FlatSpread
	comparable := func(power, clock float64) {
		if power >= floor && power <= ceiling && (!c.HasLevel || clock > c.Level) {
			c.HasLevel, c.Level, c.LevelPower = true, clock, power
		}
	}
	for _, l := range c.levels {
		comparable(l.power, l.clock)
	}
	levels := levelUpdate{levels: c.levels}
	for i := 0; i < recentFrom; {
		var power float64
		i, clocks, power, _ = block(i)
		if len(clocks) > 0 {
			m := medianInPlace(clocks)
			comparable(power, m)
			levels.add(power, m)
		}
	}
	c.levels = levels.levels
	return c
}

// continued: after a pause as long as a window, a job starts afresh.
func (c ClockLoss) continued(start time.Time, fromOldest bool, now time.Time, window time.Duration) ClockLoss {
	same := !c.since.IsZero() && (c.since.Equal(start) || fromOldest && !c.since.After(start))
	switch {
	case !same:
		return ClockLoss{since: start}
	case c.busyAt.IsZero() || now.Sub(c.busyAt) > window:
		return ClockLoss{since: c.since}
	}
	return ClockLoss{levels: c.levels, since: c.since, busyAt: c.busyAt}
}

type levelUpdate struct {
	levels []clockLevel
	copied bool
}

func (u *levelUpdate) add(power, clock float64) {
	w := int(math.Floor(min(max(power, 0), 1e9)))
	k, found := slices.BinarySearchFunc(u.levels, w, func(l clockLevel, w int) int { return cmp.Compare(l.watt, w) })
	if found && u.levels[k].clock >= clock || !found && len(u.levels) >= maxClockLevels {
		return
	}
	if !u.copied {
		u.levels, u.copied = slices.Clone(u.levels), true
	}
	if found {
		u.levels[k] = clockLevel{w, power, clock}
		return
	}
	u.levels = slices.Insert(u.levels, k, clockLevel{w, power, clock})
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

// judgeClocks: samples are all those held, as the busy stretch may begin before run.
func judgeClocks(v *ThermalVerdict, run, samples []ThermalSample, now time.Time, previous ThermalVerdict, cfg ThermalConfig) {
	share, fall := ThermalSlowdownShare, ClockFallRatio
	if previous.State == Throttled {
		share *= stayCounterFactor
		fall *= stayFallFactor
	}
	v.SlowdownShare, _ = counterShare(run, now, cfg)
	v.CounterSlowdown = v.SlowdownShare >= share

	v.Clock = clockLoss(samples, now, cfg, previous.Clock)
	v.ClockFell = v.Clock.fell(fall)
	warm := warmTemperature
	if previous.State == Throttled {
		warm -= stayHotMargin
	}
	v.ClockLost = v.ClockFell && (v.Clock.RecentTemperature >= warm || v.Hot)
	if v.Signature {
		v.SignatureOnly = !v.Clock.HasClock
		v.ClockHolding = v.Clock.HasClock && !v.ClockFell
	}
}

// hotByMargin: the driver knows its own limit better than a fixed temperature does.
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
