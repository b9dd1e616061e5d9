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

// replay is what the live collector's analysis makes of the samples (time
// order, each after the one before), thermal.Replay: the throttle
// episodes, their evidence in the words of the sampler's log, and the time
// throttled; judged is false when no step covered a whole window.
func replay(samples []judge.ThermalSample, cfg judge.ThermalConfig) (episodes []Episode, throttled time.Duration, judged bool) {
	res := thermal.Replay(samples, cfg, nil)
	episodes = make([]Episode, 0, len(res.Episodes))
	for _, e := range res.Episodes {
		episodes = append(episodes, Episode{Start: e.Start, End: e.End, Open: e.Open, Evidence: e.Evidence()})
	}
	return episodes, res.Throttled, res.Judged > 0
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
	var util, clock, margin acc
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
		if s.TemperatureMargin != nil {
			margin.add(*s.TemperatureMargin)
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
	if margin.n > 0 {
		out.TemperatureMargin = ptr(margin.sum / float64(margin.n))
	}
	return out
}
