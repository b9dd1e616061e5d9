package judge

import (
	"math"
	"time"
)

type ThermalStep struct {
	Time       time.Time
	Sample     *ThermalSample // nil for a sampling time that brought no sample
	Verdict    ThermalVerdict
	Transition ThermalTransition
}

// ThermalEpisode is one stay in Throttled, to the last Step while Open.
type ThermalEpisode struct {
	Start, End                               time.Time
	Open                                     bool
	Signature, NVMLSlowdown, CounterSlowdown bool
	ClockFall, SignatureOnly, ClockLost      bool
}

func (e ThermalEpisode) Evidence() string {
	return ThermalVerdict{Signature: e.Signature, ClockFell: e.ClockFall, SignatureOnly: e.SignatureOnly && !e.ClockFall,
		ClockLost: e.ClockLost && !e.Signature, ThermalSlowdown: e.NVMLSlowdown, CounterSlowdown: e.CounterSlowdown}.Evidence()
}

// note: a signature with the clock holding is no evidence of throttling.
func (e *ThermalEpisode) note(v ThermalVerdict) {
	signature := v.Signature && !v.ClockHolding
	e.Signature = e.Signature || signature
	e.ClockFall = e.ClockFall || signature && v.ClockFell
	e.SignatureOnly = e.SignatureOnly || signature && v.SignatureOnly
	e.ClockLost = e.ClockLost || !signature && v.ClockLost
	e.NVMLSlowdown = e.NVMLSlowdown || v.ThermalSlowdown
	e.CounterSlowdown = e.CounterSlowdown || v.CounterSlowdown
}

type ThermalReplayed struct {
	Episodes  []ThermalEpisode
	Throttled time.Duration // the ThermalMonitor's ThrottledTime at the last Step
	Steps     int           // Steps taken
	// Skipped: the live ThermalMonitor's verdict at each is Collecting.
	Skipped int
	Refused int // samples left out: not later than the one before
	Judged  int
}

// ReplayThermal steps with an empty step at each sampling time that brought no sample,
// so that a Sampler's log replays into its verdicts step for step (figures within rounding).
func ReplayThermal(samples []ThermalSample, cfg ThermalConfig, each func(ThermalStep)) ThermalReplayed {
	rp := NewThermalReplayer(cfg, each)
	for i := range samples {
		rp.Add(&samples[i])
	}
	return rp.Result()
}

type ThermalReplayer struct {
	cfg  ThermalConfig
	each func(ThermalStep)
	m    *ThermalMonitor
	res  ThermalReplayed
	open bool // the last episode is open
	done func(ThermalEpisode)
}

func NewThermalReplayer(cfg ThermalConfig, each func(ThermalStep)) *ThermalReplayer {
	return &ThermalReplayer{cfg: cfg, each: each, m: newThermalMonitor(cfg, false)}
}

func (rp *ThermalReplayer) step(now time.Time, s *ThermalSample) {
	m, res := rp.m, &rp.res
	tr := m.Step(now, s)
	res.Steps++
	if m.verdict.State != Collecting {
		res.Judged++
	}
	if rp.each != nil {
		rp.each(ThermalStep{Time: now, Sample: s, Verdict: m.verdict, Transition: tr})
	}
	if tr.Entered {
		res.Episodes = append(res.Episodes, ThermalEpisode{Start: now})
		rp.open = true
	}
	if !rp.open {
		return
	}
	e := &res.Episodes[len(res.Episodes)-1]
	if m.verdict.State == Throttled {
		e.note(m.verdict)
	}
	e.End = now
	rp.open = !tr.Left
	if tr.Left && rp.done != nil {
		rp.done(*e)
		res.Episodes = res.Episodes[:0]
	}
}

// HandOff, so that a flapping run costs no memory per episode here.
func (rp *ThermalReplayer) HandOff(done func(ThermalEpisode)) { rp.done = done }

func (rp *ThermalReplayer) Add(s *ThermalSample) {
	m, cfg := rp.m, rp.cfg
	if m.stepped {
		if !s.Time.After(m.last) {
			rp.res.Refused++
			return
		}
		limit := s.Time.Add(-cfg.Interval / 2)
		for tick := m.last.Add(cfg.Interval); tick.Before(limit); tick = tick.Add(cfg.Interval) {
			if m.verdict.Latest == nil {
				// Nothing is recent, so the verdict is Collecting whatever
				// the time: a gap of any length costs a few Steps.
				n := (limit.Sub(tick) - 1) / cfg.Interval
				tick = tick.Add(n * cfg.Interval)
				rp.res.Skipped += int(n)
			}
			rp.step(tick, nil)
		}
	}
	rp.step(s.Time, s)
}

func (rp *ThermalReplayer) Result() ThermalReplayed {
	res := rp.res
	res.Episodes = append([]ThermalEpisode(nil), rp.res.Episodes...)
	if rp.open {
		res.Episodes[len(res.Episodes)-1].Open = true
	}
	res.Throttled = rp.m.ThrottledTime()
	return res
}

func ThermalSlowdownSeconds(secs map[string]float64) *float64 {
	sw, hw := counter(secs, "sw_thermal_slowdown"), counter(secs, "hw_thermal_slowdown")
	switch {
	case sw == nil:
		return hw
	case hw == nil:
		return sw
	}
	sum := *sw + *hw
	return &sum
}

func counter(secs map[string]float64, reason string) *float64 {
	v, ok := secs[reason]
	if !ok {
		return nil
	}
	return NonNegative(&v)
}

func PowerCapSeconds(secs map[string]float64) *float64 { return counter(secs, "sw_power_cap") }

func NonNegative(v *float64) *float64 {
	if v == nil || !(*v >= 0) || math.IsInf(*v, 1) {
		return nil
	}
	return v
}
