package report

import (
	"time"

	"github.com/spark-exporter/spark_exporter/internal/judge"
	"github.com/spark-exporter/spark_exporter/internal/thermal"
)

// MaxWindowSamples bounds the samples one judgement reads: a log faster
// than Window/MaxWindowSamples (under 1 s for the default 10-minute
// window) is averaged into steps of that length before it is judged, so
// that each step costs at most a window of MaxWindowSamples samples and a
// report takes time linear in the log's rows.
const MaxWindowSamples = 600

// replayed is what the live collector's analysis made of a run of
// samples.
type replayed struct {
	episodes  []Episode
	throttled time.Duration
}

// replay steps the live collector's analysis over the samples (time
// order, each after the one before) as its sampler does: judge.AnalyzeThermal
// at each sample's time with the window thermal.Monitor would hold, and at
// each sampling time, cfg.Interval after the previous one, that brought no
// sample. It is thermal.Replay without the record of every step, and
// without a step per interval across a silence: once no sample is recent
// the verdict stays Collecting until the next one, so the steps in between
// are skipped. Memory is one window; time is linear in the samples and in
// the steps up to the gap.
func replay(samples []judge.ThermalSample, cfg judge.ThermalConfig) replayed {
	var res replayed
	st := newStepper(cfg)
	var open *Episode
	var ev thermal.Episode
	step := func(now time.Time, s *judge.ThermalSample) {
		was := st.verdict.State
		st.step(now, s)
		v := st.verdict
		if v.State == judge.Throttled && was != judge.Throttled {
			res.episodes = append(res.episodes, Episode{Start: now})
			open, ev = &res.episodes[len(res.episodes)-1], thermal.Episode{}
		}
		if open == nil {
			return
		}
		if v.State == judge.Throttled {
			ev.Signature = ev.Signature || v.Signature
			ev.NVMLSlowdown = ev.NVMLSlowdown || v.ThermalSlowdown
			ev.CounterSlowdown = ev.CounterSlowdown || v.CounterSlowdown
		}
		open.End, open.Evidence = now, ev.Evidence()
		if v.State != judge.Throttled {
			open = nil
		}
	}
	for i := range samples {
		if st.stepped {
			limit := samples[i].Time.Add(-cfg.Interval / 2)
			empty, jumped := 0, false
			for tick := st.last.Add(cfg.Interval); tick.Before(limit); tick = tick.Add(cfg.Interval) {
				step(tick, nil)
				empty++
				if st.verdict.Latest != nil || empty <= judge.GapIntervals+1 {
					continue
				}
				if jumped {
					break // a gap too long for time.Duration: nothing more to see
				}
				// Nothing is recent: the verdict holds until the next
				// sample. On to the last sampling times before it.
				if left := limit.Sub(tick); left > 2*cfg.Interval {
					tick = tick.Add((left/cfg.Interval - 1) * cfg.Interval)
				}
				jumped = true
			}
		}
		step(samples[i].Time, &samples[i])
	}
	if open != nil {
		open.Open = true
	}
	res.throttled = st.throttled
	return res
}

// stepper is thermal.Monitor's stepping (its window of Config.Capacity
// samples, the verdict with the previous state, the throttled time) over
// one reused buffer: a Monitor copies its window at every step for the
// readers of its snapshots, which a replay does not have.
type stepper struct {
	cfg       judge.ThermalConfig
	capacity  int
	back      []judge.ThermalSample // the buffer the window slides over
	window    []judge.ThermalSample
	verdict   judge.ThermalVerdict
	stepped   bool
	last      time.Time
	throttled time.Duration
}

func newStepper(cfg judge.ThermalConfig) *stepper {
	c := cfg.Capacity()
	back := make([]judge.ThermalSample, 0, 2*c)
	return &stepper{cfg: cfg, capacity: c, back: back, window: back, verdict: judge.ThermalVerdict{State: judge.Collecting}}
}

func (st *stepper) step(now time.Time, s *judge.ThermalSample) {
	if s != nil && (len(st.window) == 0 || s.Time.After(st.window[len(st.window)-1].Time)) {
		if len(st.window) == st.capacity {
			st.window = st.window[1:]
		}
		if len(st.window) == cap(st.window) {
			st.window = st.back[:copy(st.back[:cap(st.back)], st.window)]
		}
		st.window = append(st.window, *s)
	}
	was := st.verdict.State
	if st.stepped && was == judge.Throttled {
		st.throttled += min(now.Sub(st.last), st.cfg.MaxGap())
	}
	st.verdict = judge.AnalyzeThermal(st.window, now, was, st.cfg)
	st.stepped, st.last = true, now
}

// average merges the samples (time order) into one per step of length
// step: mean temperature, power, utilisation and SM clock, the reasons
// of any, the latest counters, at the time of the step's last sample.
func average(samples []judge.ThermalSample, step time.Duration) []judge.ThermalSample {
	var out []judge.ThermalSample
	for i := 0; i < len(samples); {
		end := samples[i].Time.Add(step)
		j := i
		for j < len(samples) && samples[j].Time.Before(end) {
			j++
		}
		out = append(out, merge(samples[i:j]))
		i = j
	}
	return out
}

func merge(group []judge.ThermalSample) judge.ThermalSample {
	last := group[len(group)-1]
	out := judge.ThermalSample{Time: last.Time, ThermalSlowdownSeconds: last.ThermalSlowdownSeconds, PowerCapSeconds: last.PowerCapSeconds}
	var util, clock acc
	var reasons *uint64
	for _, s := range group {
		out.Temperature += s.Temperature
		out.Power += s.Power
		if s.Utilization != nil {
			util.add(*s.Utilization)
		}
		if s.SMClock != nil {
			clock.add(*s.SMClock)
		}
		if s.Reasons != nil {
			r := *s.Reasons
			if reasons != nil {
				r |= *reasons
			}
			reasons = &r
		}
		if s.ThermalSlowdownSeconds != nil {
			out.ThermalSlowdownSeconds = s.ThermalSlowdownSeconds
		}
		if s.PowerCapSeconds != nil {
			out.PowerCapSeconds = s.PowerCapSeconds
		}
	}
	n := float64(len(group))
	out.Temperature /= n
	out.Power /= n
	out.Reasons = reasons
	if util.n > 0 {
		out.Utilization = ptr(util.sum / float64(util.n))
	}
	if clock.n > 0 {
		out.SMClock = ptr(clock.sum / float64(clock.n))
	}
	return out
}
