package report

import (
	"time"

	"github.com/spark-exporter/spark_exporter/internal/judge"
)

// maxWindowSamples: a faster log is averaged into steps, so that a report takes time linear in its rows.
const maxWindowSamples = 600

// replay: judged is false when no step covered a whole window.
func replay(samples []judge.ThermalSample, cfg judge.ThermalConfig, each func(Episode)) (throttled time.Duration, judged bool) {
	rp := newReplayer(cfg, each)
	for i := range samples {
		rp.Add(&samples[i])
	}
	res := result(rp, each)
	return res.Throttled, res.Judged > 0
}

func newReplayer(cfg judge.ThermalConfig, each func(Episode)) *judge.ThermalReplayer {
	rp := judge.NewThermalReplayer(cfg, nil)
	rp.HandOff(func(e judge.ThermalEpisode) { each(episodeOf(e)) })
	return rp
}

func result(rp *judge.ThermalReplayer, each func(Episode)) judge.ThermalReplayed {
	res := rp.Result()
	for _, e := range res.Episodes {
		each(episodeOf(e))
	}
	return res
}

func episodeOf(e judge.ThermalEpisode) Episode {
	return Episode{Start: e.Start, End: e.End, Open: e.Open, Evidence: e.Evidence()}
}

type averager struct {
	step  time.Duration
	end   time.Time // the current step's end
	group merger
}

func (a *averager) add(s judge.ThermalSample) (judge.ThermalSample, bool) {
	var out judge.ThermalSample
	done := false
	if a.group.n > 0 && !s.Time.Before(a.end) {
		out, done = a.group.sample(), true
		a.group = merger{}
	}
	if a.group.n == 0 {
		a.end = s.Time.Add(a.step)
	}
	a.group.add(s)
	return out, done
}

func (a *averager) flush() (judge.ThermalSample, bool) {
	if a.group.n == 0 {
		return judge.ThermalSample{}, false
	}
	out := a.group.sample()
	a.group = merger{}
	return out, true
}

// merger ORs the reasons and keeps the latest counters.
type merger struct {
	n                  int
	last               judge.ThermalSample
	temp, power        float64
	util, clock, marg  acc
	reasons            *uint64
	slowdown, powerCap *float64
}

func (m *merger) add(s judge.ThermalSample) {
	m.n++
	m.last = s
	m.temp += s.Temperature
	m.power += s.Power
	if s.Utilization != nil {
		m.util.add(*s.Utilization)
	}
	if s.SMClock != nil {
		m.clock.add(*s.SMClock)
	}
	if s.TemperatureMargin != nil {
		m.marg.add(*s.TemperatureMargin)
	}
	if s.Reasons != nil {
		r := *s.Reasons
		if m.reasons != nil {
			r |= *m.reasons
		}
		m.reasons = &r
	}
	if s.ThermalSlowdownSeconds != nil {
		m.slowdown = s.ThermalSlowdownSeconds
	}
	if s.PowerCapSeconds != nil {
		m.powerCap = s.PowerCapSeconds
	}
}

func (m *merger) sample() judge.ThermalSample {
	n := float64(m.n)
	out := judge.ThermalSample{Time: m.last.Time, Temperature: m.temp / n, Power: m.power / n, Reasons: m.reasons,
		ThermalSlowdownSeconds: m.slowdown, PowerCapSeconds: m.powerCap}
	if m.util.n > 0 {
		out.Utilization = ptr(m.util.sum / float64(m.util.n))
	}
	if m.clock.n > 0 {
		out.SMClock = ptr(m.clock.sum / float64(m.clock.n))
	}
	if m.marg.n > 0 {
		out.TemperatureMargin = ptr(m.marg.sum / float64(m.marg.n))
	}
	return out
}

// maxPictureSamples: --svg is 1,000-odd pixels wide.
const maxPictureSamples = 8192

type picture struct {
	k       int
	maxGap  time.Duration
	group   merger
	samples []judge.ThermalSample
}

func newPicture(total int, maxGap time.Duration) *picture {
	return &picture{k: max(1, (total+maxPictureSamples-1)/maxPictureSamples), maxGap: maxGap}
}

func (p *picture) add(s judge.ThermalSample) {
	if p.k == 1 {
		p.samples = append(p.samples, s)
		return
	}
	p.group.add(s)
	if p.group.n == p.k {
		p.samples = append(p.samples, p.group.sample())
		p.group = merger{}
	}
}

func (p *picture) gap() time.Duration { return p.maxGap * time.Duration(p.k) }
