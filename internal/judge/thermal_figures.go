package judge

import (
	"math"
	"slices"
)

// sums over a run, from its first sample to this one.
type sums struct {
	power, powerAbs, temp, tempAbs   float64
	t, tt, ty, tyAbs                 float64 // t: seconds from the run's first sample
	util, utilAbs, margin, marginAbs float64
	n, utilN, marginN, odd           int
	slowdown, powerCap               counterSum
}

type counterSum struct {
	grew, grewAbs, last float64
	n                   int
}

func (p *sums) add(s *ThermalSample, t float64) {
	if s.odd() {
		p.odd++
		return
	}
	p.n++
	p.power += s.Power
	p.powerAbs += math.Abs(s.Power)
	p.temp += s.Temperature
	p.tempAbs += math.Abs(s.Temperature)
	p.t += t
	p.tt += t * t
	p.ty += t * s.Temperature
	p.tyAbs += t * math.Abs(s.Temperature)
	if u := s.Utilization; u != nil {
		p.util += *u
		p.utilAbs += math.Abs(*u)
		p.utilN++
	}
	if m := s.TemperatureMargin; m != nil {
		p.margin += *m
		p.marginAbs += math.Abs(*m)
		p.marginN++
	}
	p.slowdown.add(s.ThermalSlowdownSeconds)
	p.powerCap.add(s.PowerCapSeconds)
}

// add takes growth's rule.
func (c *counterSum) add(v *float64) {
	if v == nil {
		return
	}
	if c.n > 0 {
		d := *v - c.last
		if d < 0 {
			d = *v
		}
		c.grew += d
		c.grewAbs += math.Abs(d)
	}
	c.last = *v
	c.n++
}

const unit = 0x1p-53 // float64's unit roundoff

// figure names what an estimate is of, so that it can be recomputed.
type figure uint8

const (
	powerFigure figure = iota
	temperatureFigure
	utilizationFigure
	marginFigure
	slopeFigure
	slowdownFigure
	powerCapFigure
	shareFigure
)

// estimate of a figure over [a, b) is within err of what a full recomputation
// gives; a decision that err leaves open takes the full recomputation's.
type estimate struct {
	v, err float64
	has    bool
	of     figure
	a, b   int
	per    float64 // shareFigure: the seconds the growth is shared over
	w      *thermalWindow
}

func (e *estimate) resolve() {
	if e.err > 0 {
		e.v, e.has = e.w.full(e)
		e.err = 0
	}
}

func (e *estimate) near(x float64) bool { return e.err > 0 && !(math.Abs(e.v-x) > e.err) }

func (e *estimate) atLeast(x float64) bool {
	if e.near(x) {
		e.resolve()
	}
	return e.v >= x
}

func (e *estimate) atMost(x float64) bool {
	if e.near(x) {
		e.resolve()
	}
	return e.v <= x
}

// full recomputes e's figure over its range, sample by sample.
func (w *thermalWindow) full(e *estimate) (float64, bool) {
	run := w.buf[e.a:e.b]
	switch e.of {
	case powerFigure:
		return powerMean(run), true
	case temperatureFigure:
		return temperatureMean(run), true
	case utilizationFigure:
		return utilizationMean(run)
	case marginFigure:
		return marginMean(run)
	case slopeFigure:
		return w.exactSlope(e.a, e.b)
	case slowdownFigure:
		return growth(run, slowdownSeconds)
	case powerCapFigure:
		return growth(run, powerCapSeconds)
	}
	g, ok := growth(run, slowdownSeconds)
	return g / e.per, ok
}

// estimate is e's figure, recomputed in full when the window keeps no sums
// (or odd ones) for it; otherwise from the sums.
func (w *thermalWindow) estimate(of figure, a, b int, exact bool) estimate {
	e := estimate{of: of, a: a, b: b, w: w}
	switch {
	case exact:
		e.v, e.has = w.full(&e)
	case of == slopeFigure:
		w.estimateSlope(&e)
	case of == slowdownFigure || of == powerCapFigure:
		w.estimateGrowth(&e)
	default:
		w.estimateMean(&e)
	}
	return e
}

// figures are a verdict's numbers over the window's part of the run.
type figures struct {
	powerMean, tempMean, util, margin estimate
	slope, early, recent              estimate
	slowdown, powerCap, share         estimate
	powerMax, powerMin                float64
}

func (f *figures) rises(rate float64) bool {
	return f.slope.has && f.recent.has && f.slope.atLeast(rate) && f.recent.atLeast(rate)
}

func (f *figures) settling() bool {
	e, r := &f.early, &f.recent
	if !e.has || !r.has {
		return false
	}
	if bound := r.err + settlingRatio*e.err; bound > 0 {
		bound += 4 * unit * (math.Abs(r.v) + math.Abs(e.v))
		if !(math.Abs(r.v-settlingRatio*e.v) > bound) {
			e.resolve()
			r.resolve()
		}
	}
	return r.v < settlingRatio*e.v
}

func (f *figures) stats() *ThermalStats {
	return &ThermalStats{PowerMean: f.powerMean.v, PowerSpread: f.powerMax - f.powerMin, PowerMax: f.powerMax,
		TemperatureMean: f.tempMean.v, Slope: f.slope.v, HasSlope: f.slope.has,
		EarlySlope: f.early.v, HasEarlySlope: f.early.has, RecentSlope: f.recent.v, HasRecentSlope: f.recent.has}
}

func (w *thermalWindow) figures(st *step) figures {
	a, b, x := st.a, st.end, st.exact
	f := figures{
		powerMean: w.estimate(powerFigure, a, b, x), tempMean: w.estimate(temperatureFigure, a, b, x),
		util: w.estimate(utilizationFigure, a, b, x), margin: w.estimate(marginFigure, a, b, x),
		slope: w.estimate(slopeFigure, a, b, x), early: w.estimate(slopeFigure, a, st.recent, x),
		recent: w.estimate(slopeFigure, st.recent, b, x), slowdown: w.estimate(slowdownFigure, a, b, x),
		powerCap: w.estimate(powerCapFigure, a, b, x), share: w.counterShare(st),
	}
	if x {
		f.powerMax, f.powerMin = powerExtremes(w.buf[a:b])
	} else {
		f.powerMax, f.powerMin = w.power.over(w.buf, a, b)
	}
	return f
}

// ends are the sums to subtract and to subtract from for [a, b), and how
// much rounding each may carry.
func (w *thermalWindow) ends(a, b int) (lo, hi *sums, rounding float64) {
	start := w.marks[b-1].run
	lo = &noSums
	if a > start {
		lo = &w.sums[a-1]
	}
	return lo, &w.sums[b-1], 4 * unit * float64(b-start+2)
}

var noSums sums

// of is a mean figure's sum, the sum of its magnitudes and its count.
func (p *sums) of(f figure) (float64, float64, int) {
	switch f {
	case powerFigure:
		return p.power, p.powerAbs, p.n
	case temperatureFigure:
		return p.temp, p.tempAbs, p.n
	case utilizationFigure:
		return p.util, p.utilAbs, p.utilN
	}
	return p.margin, p.marginAbs, p.marginN
}

func (w *thermalWindow) estimateMean(e *estimate) {
	lo, hi, g := w.ends(e.a, e.b)
	sLo, absLo, nLo := lo.of(e.of)
	sHi, absHi, nHi := hi.of(e.of)
	n := nHi - nLo
	if n == 0 {
		return
	}
	m := (sHi - sLo) / float64(n)
	e.v, e.has, e.err = m, true, g*(absHi+absLo)/float64(n)+4*unit*math.Abs(m)
}

// estimateSlope bounds both its own rounding and a two-pass least squares'
// over [a, b); a run too short for the bound is recomputed.
func (w *thermalWindow) estimateSlope(e *estimate) {
	a, b := e.a, e.b
	n := b - a
	if n < 2 {
		return
	}
	lo, hi, g := w.ends(a, b)
	nf := float64(n)
	st, stt, sy, sty := hi.t-lo.t, hi.tt-lo.tt, hi.temp-lo.temp, hi.ty-lo.ty
	ya, tya := hi.tempAbs-lo.tempAbs, hi.tyAbs-lo.tyAbs
	eSt, eStt, eSy, eSty := g*(hi.t+lo.t), g*(hi.tt+lo.tt), g*(hi.tempAbs+lo.tempAbs), g*(hi.tyAbs+lo.tyAbs)
	tf := w.marks[b-1].off.Seconds()
	d := (w.marks[b-1].off - w.marks[a].off).Seconds()
	k := float64(n + 3)

	sxx := stt - st*st/nf
	exx := eStt + 2*st*eSt/nf + 4*unit*(stt+st*st/nf) + 4*unit*nf*d*tf + 4*unit*k*k*d*d
	sxy := sty - st*sy/nf
	exy := eSty + (st*eSy+ya*eSt)/nf + 4*unit*(tya+st*ya/nf) + 4*unit*tf*ya + 8*unit*k*d*ya
	if !(sxx > 4*exx) {
		e.v, e.has = w.full(e)
		return
	}
	s := sxy / sxx
	e.v, e.has, e.err = s, true, 2*(exy+math.Abs(s)*exx)/(sxx-exx)+4*unit*math.Abs(s)
}

func (p *sums) counter(f figure) *counterSum {
	if f == powerCapFigure {
		return &p.powerCap
	}
	return &p.slowdown
}

func (w *thermalWindow) estimateGrowth(e *estimate) {
	lo, hi, g := w.ends(e.a, e.b)
	nLo := lo.counter(e.of).n
	if hi.counter(e.of).n-nLo < 2 {
		return
	}
	// The first counter in [a, b) has no rise within it.
	first, last := e.a, e.b-1
	for first < last {
		mid := int(uint(first+last) >> 1)
		if w.sums[mid].counter(e.of).n > nLo {
			last = mid
		} else {
			first = mid + 1
		}
	}
	c0, c1 := w.sums[first].counter(e.of), hi.counter(e.of)
	grew := c1.grew - c0.grew
	e.v, e.has, e.err = grew, true, g*(c1.grewAbs+c0.grewAbs)+4*unit*math.Abs(grew)
}

// counterShare spans at least recentSpan, so that one sample's growth right
// after a start is not read as a whole span of slowdown.
func (w *thermalWindow) counterShare(st *step) estimate {
	span := w.cfg.recentSpan()
	i := max(st.a, w.after(st.a, st.end, st.nowOff-span)-1)
	e := estimate{of: shareFigure, a: i, b: st.end, w: w, per: max(st.now.Sub(w.buf[i].Time), span).Seconds()}
	if st.exact {
		e.v, e.has = w.full(&e)
		return e
	}
	grew := w.estimate(slowdownFigure, i, st.end, false)
	if grew.has {
		e.v, e.has = grew.v/e.per, true
		e.err = grew.err/e.per + 4*unit*math.Abs(e.v)
	}
	return e
}

// extremes keeps the power's maximum and minimum as the window's part of
// the run slides forward.
type extremes struct {
	lo, hi     int
	maxQ, minQ []int
}

// above orders −0 below +0, as max and min do.
func above(x, y float64) bool { return x > y || x == y && !math.Signbit(x) && math.Signbit(y) }

func (e *extremes) over(buf []ThermalSample, a, b int) (hi, lo float64) {
	if a < e.lo || b < e.hi || a > e.hi {
		e.maxQ, e.minQ, e.hi = e.maxQ[:0], e.minQ[:0], a
	}
	for i := e.hi; i < b; i++ {
		p := buf[i].Power
		for n := len(e.maxQ); n > 0 && !above(buf[e.maxQ[n-1]].Power, p); n-- {
			e.maxQ = e.maxQ[:n-1]
		}
		for n := len(e.minQ); n > 0 && !above(p, buf[e.minQ[n-1]].Power); n-- {
			e.minQ = e.minQ[:n-1]
		}
		e.maxQ, e.minQ = append(e.maxQ, i), append(e.minQ, i)
	}
	for e.maxQ[0] < a {
		e.maxQ = e.maxQ[1:]
	}
	for e.minQ[0] < a {
		e.minQ = e.minQ[1:]
	}
	e.lo, e.hi = a, b
	return buf[e.maxQ[0]].Power, buf[e.minQ[0]].Power
}

// clockBlocks keeps each recentSpan block's SM clocks sorted as the blocks
// slide, so that a median costs the block's changes; by age in spans.
type clockBlocks []sortedClocks

type sortedClocks struct {
	lo, hi int
	clocks []float64
}

func (c *clockBlocks) at(k int) *sortedClocks {
	for len(*c) <= k {
		*c = append(*c, sortedClocks{})
	}
	return &(*c)[k]
}

func (s *sortedClocks) sync(buf []ThermalSample, lo, hi int) {
	if lo < s.lo || hi < s.hi || lo > s.hi {
		s.clocks = slices.Grow(s.clocks[:0], hi-lo)
		for _, x := range buf[lo:hi] {
			if x.SMClock != nil {
				s.clocks = append(s.clocks, *x.SMClock)
			}
		}
		slices.Sort(s.clocks)
		s.lo, s.hi = lo, hi
		return
	}
	for _, x := range buf[s.lo:lo] {
		if x.SMClock != nil {
			i, _ := slices.BinarySearch(s.clocks, *x.SMClock)
			s.clocks = slices.Delete(s.clocks, i, i+1)
		}
	}
	for _, x := range buf[s.hi:hi] {
		if x.SMClock != nil {
			i, _ := slices.BinarySearch(s.clocks, *x.SMClock)
			s.clocks = slices.Insert(s.clocks, i, *x.SMClock)
		}
	}
	s.lo, s.hi = lo, hi
}

func (s *sortedClocks) median() float64 {
	xs, n := s.clocks, len(s.clocks)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}
