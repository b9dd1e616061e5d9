package thermal

import (
	"math"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/judge"
	"github.com/spark-exporter/spark_exporter/internal/thermallog"
)

// SampleOf applies the Sampler's rule to a logged row.
func SampleOf(r thermallog.Row) *judge.ThermalSample {
	if r.Temperature == nil || r.Power == nil {
		return nil
	}
	return &judge.ThermalSample{Time: r.Time, Temperature: *r.Temperature, Power: *r.Power,
		SMClock: r.SMClock, Utilization: r.Utilization, Reasons: r.Reasons,
		ThermalSlowdownSeconds: ThermalSlowdownSeconds(r.EventSeconds), PowerCapSeconds: PowerCapSeconds(r.EventSeconds)}
}

type Step struct {
	Time       time.Time
	Sample     *judge.ThermalSample // nil for a sampling time that brought no sample
	Verdict    judge.ThermalVerdict
	Transition Transition
}

// Episode is one stay in Throttled, to the last Step while Open.
type Episode struct {
	Start, End                               time.Time
	Open                                     bool
	Signature, NVMLSlowdown, CounterSlowdown bool
	ClockFall, SignatureOnly, ClockLost      bool
}

func (e Episode) Evidence() string {
	return judge.ThermalVerdict{Signature: e.Signature, ClockFell: e.ClockFall, SignatureOnly: e.SignatureOnly && !e.ClockFall,
		ClockLost: e.ClockLost && !e.Signature, ThermalSlowdown: e.NVMLSlowdown, CounterSlowdown: e.CounterSlowdown}.Evidence()
}

// note: a signature with the clock holding is no evidence of throttling.
func (e *Episode) note(v judge.ThermalVerdict) {
	signature := v.Signature && !v.ClockHolding
	e.Signature = e.Signature || signature
	e.ClockFall = e.ClockFall || signature && v.ClockFell
	e.SignatureOnly = e.SignatureOnly || signature && v.SignatureOnly
	e.ClockLost = e.ClockLost || !signature && v.ClockLost
	e.NVMLSlowdown = e.NVMLSlowdown || v.ThermalSlowdown
	e.CounterSlowdown = e.CounterSlowdown || v.CounterSlowdown
}

type Replayed struct {
	Episodes  []Episode
	Throttled time.Duration // the Monitor's ThrottledTime at the last Step
	Steps     int           // Steps taken
	// Skipped: the live Monitor's verdict at each is Collecting.
	Skipped int
	Refused int // samples left out: not later than the one before
	Judged  int
}

// Replay steps with an empty Step at each sampling time that brought no sample,
// so that a Sampler's log replays into its verdicts Step for Step (figures within rounding).
func Replay(samples []judge.ThermalSample, cfg judge.ThermalConfig, each func(Step)) Replayed {
	rp := NewReplayer(cfg, each)
	for i := range samples {
		rp.Add(&samples[i])
	}
	return rp.Result()
}

type Replayer struct {
	cfg  judge.ThermalConfig
	each func(Step)
	m    *Monitor
	res  Replayed
	open bool // the last episode is open
	done func(Episode)
}

func NewReplayer(cfg judge.ThermalConfig, each func(Step)) *Replayer {
	return &Replayer{cfg: cfg, each: each, m: newMonitor(cfg, false)}
}

func (rp *Replayer) step(now time.Time, s *judge.ThermalSample) {
	m, res := rp.m, &rp.res
	tr := m.Step(now, s)
	res.Steps++
	if m.verdict.State != judge.Collecting {
		res.Judged++
	}
	if rp.each != nil {
		rp.each(Step{Time: now, Sample: s, Verdict: m.verdict, Transition: tr})
	}
	if tr.Entered {
		res.Episodes = append(res.Episodes, Episode{Start: now})
		rp.open = true
	}
	if !rp.open {
		return
	}
	e := &res.Episodes[len(res.Episodes)-1]
	if m.verdict.State == judge.Throttled {
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
func (rp *Replayer) HandOff(done func(Episode)) { rp.done = done }

func (rp *Replayer) Add(s *judge.ThermalSample) {
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

func (rp *Replayer) Result() Replayed {
	res := rp.res
	res.Episodes = append([]Episode(nil), rp.res.Episodes...)
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
