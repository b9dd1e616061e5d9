package thermal

import (
	"math"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/judge"
	"github.com/spark-exporter/spark_exporter/internal/thermallog"
)

// SampleOf is the sample a logged row gives, nil when its temperature or
// power is missing: the rule the Sampler applies to a reading.
func SampleOf(r thermallog.Row) *judge.ThermalSample {
	if r.Temperature == nil || r.Power == nil {
		return nil
	}
	return &judge.ThermalSample{Time: r.Time, Temperature: *r.Temperature, Power: *r.Power,
		SMClock: r.SMClock, Utilization: r.Utilization, Reasons: r.Reasons,
		ThermalSlowdownSeconds: ThermalSlowdownSeconds(r.EventSeconds), PowerCapSeconds: PowerCapSeconds(r.EventSeconds)}
}

// Step is one Step of a Monitor in a replay.
type Step struct {
	Time       time.Time
	Sample     *judge.ThermalSample // nil for a sampling time that brought no sample
	Verdict    judge.ThermalVerdict
	Transition Transition
}

// Episode is one stay in Throttled: from the Step that entered it to the
// Step that left it, or to the last Step while Open.
type Episode struct {
	Start, End time.Time
	Open       bool
	// What put or held the GPU in Throttled at some Step of the episode.
	Signature, NVMLSlowdown, CounterSlowdown bool
}

// Evidence names what the episode rests on, in the words of the sampler's
// log line.
func (e Episode) Evidence() string {
	return judge.ThermalVerdict{Signature: e.Signature, ThermalSlowdown: e.NVMLSlowdown, CounterSlowdown: e.CounterSlowdown}.Evidence()
}

// Replayed is what a Monitor made of a run of samples.
type Replayed struct {
	Steps     []Step
	Episodes  []Episode
	Throttled time.Duration // the Monitor's ThrottledTime at the last Step
	Refused   int           // samples left out: not later than the one before
}

// Replay steps one Monitor over the samples (oldest first) as the Sampler
// steps it live: a Step at each sample's time, and an empty Step at each
// sampling time, cfg.Interval after the previous one, that brought no
// sample (NVML silent). A log written by the Sampler thus replays into the
// verdicts the Sampler reached, Step for Step.
func Replay(samples []judge.ThermalSample, cfg judge.ThermalConfig) Replayed {
	var res Replayed
	m := NewMonitor(cfg)
	var open *Episode
	step := func(now time.Time, s *judge.ThermalSample) {
		tr := m.Step(now, s)
		v := m.Verdict()
		res.Steps = append(res.Steps, Step{Time: now, Sample: s, Verdict: v, Transition: tr})
		if tr.Entered {
			res.Episodes = append(res.Episodes, Episode{Start: now})
			open = &res.Episodes[len(res.Episodes)-1]
		}
		if open == nil {
			return
		}
		if v.State == judge.Throttled {
			open.Signature = open.Signature || v.Signature
			open.NVMLSlowdown = open.NVMLSlowdown || v.ThermalSlowdown
			open.CounterSlowdown = open.CounterSlowdown || v.CounterSlowdown
		}
		open.End = now
		if tr.Left {
			open = nil
		}
	}
	for i := range samples {
		if len(res.Steps) > 0 {
			prev := res.Steps[len(res.Steps)-1].Time
			if !samples[i].Time.After(prev) {
				// Live, time only moves forward; a log whose clock
				// stepped back has samples no Step can take.
				res.Refused++
				continue
			}
			for tick := prev.Add(cfg.Interval); tick.Before(samples[i].Time.Add(-cfg.Interval / 2)); tick = tick.Add(cfg.Interval) {
				step(tick, nil)
			}
		}
		step(samples[i].Time, &samples[i])
	}
	if open != nil {
		open.Open = true
	}
	res.Throttled = m.ThrottledTime()
	return res
}

// ThermalSlowdownSeconds adds up NVML's SW and HW thermal slowdown
// counters (seconds by reason); nil when there is neither.
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

// counter is one clock event counter, nil when absent or not a count of
// seconds.
func counter(secs map[string]float64, reason string) *float64 {
	v, ok := secs[reason]
	if !ok {
		return nil
	}
	return NonNegative(&v)
}

// PowerCapSeconds is NVML's SW power cap counter, nil when absent.
func PowerCapSeconds(secs map[string]float64) *float64 { return counter(secs, "sw_power_cap") }

// NonNegative is v where it can be a reading of a size, time or power: nil
// for a negative, NaN or infinite value.
func NonNegative(v *float64) *float64 {
	if v == nil || !(*v >= 0) || math.IsInf(*v, 1) {
		return nil
	}
	return v
}
