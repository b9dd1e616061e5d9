package judge

import (
	"errors"
	"math"
	"time"
)

var errOutOfOrder = errors.New("sample is not later than the previous one")

// thermalWindow holds the samples a verdict reads and what each adds to the
// analysis, so that a verdict costs about the same whatever the window's length.
type thermalWindow struct {
	cfg      ThermalConfig
	capacity int
	// buf[lo:] is the window; it slides over twice its capacity, so that
	// keeping it costs one copy per capacity samples.
	buf    []ThermalSample
	marks  []mark
	sums   []sums // nil: every figure is recomputed in full (exact)
	lo     int
	power  extremes
	blocks clockBlocks
}

// mark is what a sample's predecessors make of it.
type mark struct {
	run  int           // first sample of its unbroken run since the last copy: offsets and sums start there
	busy int           // first sample of the busy stretch it ends; -1: not busy
	slow int           // first sample of the thermal slowdown streak before it
	off  time.Duration // from the run's first sample
}

// newThermalWindow: exact gives every figure as a full recomputation of the
// window does, bit for bit (what a page shows); otherwise the states and flags
// are the same, the figures within rounding, and a verdict makes no pass over
// the window unless a figure sits at a threshold. cfg must have passed Validate.
func newThermalWindow(cfg ThermalConfig, capacity int, exact bool) *thermalWindow {
	capacity = max(capacity, 2)
	w := &thermalWindow{cfg: cfg, capacity: capacity, buf: make([]ThermalSample, 0, 2*capacity),
		marks: make([]mark, 0, 2*capacity)}
	if !exact {
		w.sums = make([]sums, 0, 2*capacity)
	}
	return w
}

// add refuses a sample not later than the newest: the analysis needs time to move forward.
func (w *thermalWindow) add(s ThermalSample) error {
	if n := len(w.buf); n > w.lo && !s.Time.After(w.buf[n-1].Time) {
		return errOutOfOrder
	}
	if len(w.buf)-w.lo == w.capacity {
		w.lo++
	}
	if len(w.buf) == cap(w.buf) {
		w.compact()
	}
	w.buf = append(w.buf, s)
	w.note(len(w.buf) - 1)
	return nil
}

func (w *thermalWindow) compact() {
	n := copy(w.buf, w.buf[w.lo:])
	w.buf, w.marks, w.lo = w.buf[:n], w.marks[:0], 0
	if w.sums != nil {
		w.sums = w.sums[:0]
	}
	for i := range n {
		w.note(i)
	}
	w.power, w.blocks = extremes{}, clockBlocks{}
}

func (w *thermalWindow) note(i int) {
	s := &w.buf[i]
	m := mark{run: i, busy: -1, slow: i}
	if busySample(*s, w.cfg) {
		m.busy = i
	}
	if i > 0 {
		p, prev := w.marks[i-1], &w.buf[i-1]
		if gap := s.Time.Sub(prev.Time); gap <= w.cfg.MaxGap() {
			m.run, m.off = p.run, p.off+gap
		}
		if prev.thermalSlowdown() {
			m.slow = p.slow
		}
		if m.busy >= 0 && p.busy >= 0 {
			m.busy = p.busy
		}
	}
	w.marks = append(w.marks, m)
	if w.sums != nil {
		var p sums
		if m.run < i {
			p = w.sums[i-1]
		}
		p.add(s, m.off.Seconds())
		w.sums = append(w.sums, p)
	}
}

// samples is a copy of the window, oldest first.
func (w *thermalWindow) samples() []ThermalSample {
	return append([]ThermalSample(nil), w.buf[w.lo:]...)
}

// end is the index after the newest sample not after now.
func (w *thermalWindow) end(now time.Time) int {
	lo, hi := w.lo, len(w.buf)
	if hi == lo || !w.buf[hi-1].Time.After(now) {
		return hi
	}
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if w.buf[mid].Time.After(now) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// after is the first index in [lo, hi) whose offset is over off (hi if none);
// the indices share a run.
func (w *thermalWindow) after(lo, hi int, off time.Duration) int {
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if w.marks[mid].off > off {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// step is one verdict's view of the window: the unbroken run [run, end),
// the window's part of it from a, the latest half from recent.
type step struct {
	now                  time.Time
	nowOff               time.Duration
	run, a, recent, end  int
	exact, covered       bool
	previous             ThermalVerdict
	climbing, hot, flat  float64
	share, fall, warmMin float64
}

// analyze judges the window at now; previous is the verdict before (hysteresis
// and the clock level it carries). Only the unbroken run ending near now counts.
func (w *thermalWindow) analyze(now time.Time, previous ThermalVerdict) ThermalVerdict {
	st, ok := w.view(now, previous)
	if !ok {
		return ThermalVerdict{State: Collecting}
	}
	v := ThermalVerdict{Covered: st.covered}
	latest := w.buf[st.end-1]
	v.Latest = &latest
	v.Samples = st.end - st.a
	v.Span = now.Sub(w.buf[st.a].Time)
	w.thresholds(&st)
	w.judge(&v, &st)
	return v
}

func (w *thermalWindow) view(now time.Time, previous ThermalVerdict) (step, bool) {
	end := w.end(now)
	if end == w.lo || now.Sub(w.buf[end-1].Time) > w.cfg.MaxGap() {
		return step{}, false
	}
	m := w.marks[end-1]
	st := step{now: now, run: max(m.run, w.lo), end: end, previous: previous}
	st.nowOff = now.Sub(w.buf[m.run].Time)
	st.exact = w.sums == nil || w.odd(st.run, end)
	st.a = st.run
	windowStart := st.nowOff - w.cfg.Window
	if st.covered = w.marks[st.run].off <= windowStart; st.covered {
		st.a = w.after(st.run, end, windowStart-1)
	}
	st.recent = w.after(st.a, end, st.nowOff-w.cfg.Window/2-1)
	return st, true
}

func (w *thermalWindow) thresholds(st *step) {
	cfg := w.cfg
	st.climbing, st.hot, st.flat = cfg.ClimbingSlope, cfg.HotTemperature, cfg.FlatSpread
	st.share, st.fall, st.warmMin = ThermalSlowdownShare, ClockFallRatio, warmTemperature
	if st.previous.State == Throttled {
		st.climbing *= stayClimbingFactor
		st.hot -= stayHotMargin
		st.flat *= stayFlatFactor
		st.share *= stayCounterFactor
		st.fall *= stayFallFactor
		st.warmMin -= stayHotMargin
	}
}

func (w *thermalWindow) judge(v *ThermalVerdict, st *step) {
	cfg, run := w.cfg, w.buf[st.a:st.end]
	f := w.figures(st)
	if v.ThermalSlowdown = run[len(run)-1].thermalSlowdown(); v.ThermalSlowdown {
		v.SlowdownFor = st.now.Sub(w.buf[max(st.a, w.marks[st.end-1].slow)].Time)
	}
	v.SlowdownSeconds, v.HasCounters = f.slowdown.v, f.slowdown.has
	v.PowerCapSeconds, v.HasPowerCap = f.powerCap.v, f.powerCap.has

	if f.util.has {
		v.Busy = f.util.atLeast(cfg.BusyUtilization)
	} else {
		v.Busy = f.powerMean.atLeast(cfg.BusyPower)
	}
	v.Flat = f.powerMax-f.powerMin <= st.flat
	v.BelowNominal = f.powerMax < cfg.BelowNominalRatio*cfg.NominalPower
	v.Rising = f.rises(cfg.ClimbingSlope)
	v.Climbing = f.rises(st.climbing) && !f.settling()
	v.Hot = f.tempMean.atLeast(st.hot)
	if f.margin.has {
		limit := HotMargin
		if st.previous.State == Throttled {
			limit += stayHotMargin
		}
		v.HasMargin, v.Hot = true, f.margin.atMost(limit)
		v.MarginMean = f.margin.v
	}
	v.Stats = f.stats()
	v.Signature = v.Covered && v.Busy && v.Flat && v.BelowNominal && (v.Climbing || v.Hot)
	w.judgeClocks(v, st, &f)

	v.State = stateOf(v)
}

func (w *thermalWindow) judgeClocks(v *ThermalVerdict, st *step, f *figures) {
	v.CounterSlowdown = f.share.atLeast(st.share)
	v.SlowdownShare = f.share.v
	var recentTemp estimate
	v.Clock, recentTemp = w.clockLoss(st)
	v.ClockFell = v.Clock.fell(st.fall)
	v.ClockLost = v.ClockFell && (recentTemp.atLeast(st.warmMin) || v.Hot)
	v.Clock.RecentTemperature = recentTemp.v
	if v.Signature {
		v.SignatureOnly = !v.Clock.HasClock
		v.ClockHolding = v.Clock.HasClock && !v.ClockFell
	}
}

// oddLimit: sums of figures beyond it could overflow, and no reading comes near it.
const oddLimit = 1e12

func oddFigure(x float64) bool { return !(math.Abs(x) <= oddLimit) }

func oddPointer(x *float64) bool { return x != nil && oddFigure(*x) }

func (s *ThermalSample) odd() bool {
	return oddFigure(s.Power) || oddFigure(s.Temperature) || oddPointer(s.Utilization) ||
		oddPointer(s.TemperatureMargin) || oddPointer(s.ThermalSlowdownSeconds) || oddPointer(s.PowerCapSeconds)
}

// odd: an odd figure in [a, b) is left to a full recomputation.
func (w *thermalWindow) odd(a, b int) bool {
	n := w.sums[b-1].odd
	if a > w.marks[b-1].run {
		n -= w.sums[a-1].odd
	}
	return n > 0
}

// stateOf is the state v's judgements add up to.
func stateOf(v *ThermalVerdict) ThermalState {
	switch {
	case (v.Signature && !v.ClockHolding) || v.ClockLost || v.ThermalSlowdown || v.CounterSlowdown:
		// A clock lost while warm needs no signature: a slow heat soak
		// climbs under its slope. NVML's word needs no full window.
		return Throttled
	case !v.Covered:
		return Collecting
	case v.ClockHolding || (v.Rising && !(v.Flat && v.BelowNominal)):
		return Watching
	}
	return Normal
}
