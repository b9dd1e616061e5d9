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
// the cap, not heat, took that clock) and at lower power. The previous verdict's
// levels go on while the run does. The estimate is the latest block's temperature.
func (w *thermalWindow) clockLoss(st *step) (ClockLoss, estimate) {
	cfg := w.cfg
	c := st.previous.Clock.continued(w.buf[st.run].Time, st.run == w.lo, st.now, cfg.Window)
	begin := st.end
	if b := w.marks[st.end-1].busy; b >= 0 {
		begin = max(b, st.run)
	}
	if begin == st.end {
		return c, estimate{}
	}
	c.busyAt = w.buf[st.end-1].Time
	span := cfg.recentSpan()
	recentFrom := w.after(begin, st.end, st.nowOff-span)
	if recentFrom == st.end {
		return c, estimate{}
	}
	recent := w.blocks.at(0)
	recent.sync(w.buf, recentFrom, st.end)
	if len(recent.clocks) == 0 {
		return c, estimate{}
	}
	power, temp := w.blockMeans(recentFrom, st.end, st.exact)
	lv := levelSearch{ClockLoss: c, cfg: cfg, recent: &power}
	lv.HasClock, lv.Recent = true, recent.median()
	lv.carried()
	levels := levelUpdate{levels: c.levels}
	for k := int((st.nowOff - w.marks[begin].off) / span); k >= 1; k-- {
		lo := w.after(begin, recentFrom, st.nowOff-time.Duration(k+1)*span)
		hi := w.after(lo, recentFrom, st.nowOff-time.Duration(k)*span)
		block := w.blocks.at(k)
		block.sync(w.buf, lo, hi)
		if lo == hi || len(block.clocks) == 0 {
			continue
		}
		m := block.median()
		p, _ := w.blockMeans(lo, hi, st.exact)
		lv.comparable(&p, m)
		levels.add(&p, m)
	}
	lv.levels = levels.levels
	lv.RecentPower = power.v
	return lv.ClockLoss, temp
}

func (w *thermalWindow) blockMeans(lo, hi int, exact bool) (power, temp estimate) {
	return w.estimate(powerFigure, lo, hi, exact), w.estimate(temperatureFigure, lo, hi, exact)
}

// levelSearch finds the level: the highest clock at power comparable to the latest block's.
type levelSearch struct {
	ClockLoss
	cfg    ThermalConfig
	recent *estimate // the latest block's power
}

// carried: only levels at watts near the recent power can be comparable.
func (l *levelSearch) carried() {
	from := watt(l.recent.v - comparablePowerWatts - l.recent.err - 1)
	to := watt(l.recent.v + l.cfg.FlatSpread + l.recent.err + 1)
	k, _ := slices.BinarySearchFunc(l.levels, from, func(c clockLevel, w int) int { return cmp.Compare(c.watt, w) })
	for ; k < len(l.levels) && l.levels[k].watt <= to; k++ {
		p := estimate{v: l.levels[k].power}
		l.comparable(&p, l.levels[k].clock)
	}
}

func (l *levelSearch) comparable(p *estimate, clock float64) {
	if l.HasLevel && !(clock > l.Level) || !l.within(p) {
		return
	}
	l.HasLevel, l.Level, l.LevelPower = true, clock, p.v
}

// within: power at most comparablePowerWatts below the recent power, at most FlatSpread above.
func (l *levelSearch) within(p *estimate) bool {
	r := l.recent
	if bound := p.err + r.err; bound > 0 {
		floor, ceiling := r.v-comparablePowerWatts, r.v+l.cfg.FlatSpread
		bound += 4 * unit * (math.Abs(floor) + math.Abs(ceiling))
		if !(math.Abs(p.v-floor) > bound) || !(math.Abs(p.v-ceiling) > bound) {
			p.resolve()
			r.resolve()
		}
	}
	floor, ceiling := r.v-comparablePowerWatts, r.v+l.cfg.FlatSpread
	return p.v >= floor && p.v <= ceiling
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

func watt(power float64) int { return int(math.Floor(min(max(power, 0), 1e9))) }

// add keeps the exact power of a level, which later verdicts compare.
func (u *levelUpdate) add(p *estimate, clock float64) {
	if p.err > 0 && watt(p.v-p.err) != watt(p.v+p.err) {
		p.resolve()
	}
	w := watt(p.v)
	k, found := slices.BinarySearchFunc(u.levels, w, func(l clockLevel, w int) int { return cmp.Compare(l.watt, w) })
	if found && u.levels[k].clock >= clock || !found && len(u.levels) >= maxClockLevels {
		return
	}
	p.resolve()
	if !u.copied {
		u.levels, u.copied = slices.Clone(u.levels), true
	}
	if found {
		u.levels[k] = clockLevel{w, p.v, clock}
		return
	}
	u.levels = slices.Insert(u.levels, k, clockLevel{w, p.v, clock})
}

func busySample(s ThermalSample, cfg ThermalConfig) bool {
	if s.Utilization != nil {
		return *s.Utilization >= cfg.BusyUtilization
	}
	return s.Power >= cfg.BusyPower
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
