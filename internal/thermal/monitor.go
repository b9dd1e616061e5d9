// Package thermal steps judge's thermal verdict over time, live or over a log.
package thermal

import (
	"time"

	"github.com/spark-exporter/spark_exporter/internal/judge"
)

// Monitor's time moves only when Step says so, so that Replay steps a log as the sampler steps live readings.
type Monitor struct {
	cfg     judge.ThermalConfig
	window  *judge.ThermalWindow
	verdict judge.ThermalVerdict
	stepped bool
	last    time.Time // time of the previous Step

	episodes     int
	throttled    time.Duration
	episodeStart time.Time
}

// NewMonitor starts a monitor whose verdicts' figures are exact; cfg must have passed Validate.
func NewMonitor(cfg judge.ThermalConfig) *Monitor { return newMonitor(cfg, true) }

func newMonitor(cfg judge.ThermalConfig, exact bool) *Monitor {
	return &Monitor{cfg: cfg, window: judge.NewThermalWindow(cfg, exact), verdict: judge.ThermalVerdict{State: judge.Collecting}}
}

type Transition struct {
	Entered bool // the GPU entered Throttled
	Left    bool // the GPU left Throttled
	Episode time.Duration
	Refused bool
}

// Step: s is nil when no reading came.
func (m *Monitor) Step(now time.Time, s *judge.ThermalSample) Transition {
	var tr Transition
	if s != nil {
		tr.Refused = m.window.Add(*s) != nil
	}
	was := m.verdict.State
	if m.stepped && was == judge.Throttled {
		// A stall of the sampler counts for at most a gap: nobody saw
		// what happened meanwhile.
		m.throttled += min(now.Sub(m.last), m.cfg.MaxGap())
	}
	m.verdict = m.window.Analyze(now, m.verdict)
	m.stepped = true
	m.last = now

	switch is := m.verdict.State; {
	case is == judge.Throttled && was != judge.Throttled:
		m.episodes++
		m.episodeStart = now
		tr.Entered = true
	case is != judge.Throttled && was == judge.Throttled:
		tr.Left = true
		tr.Episode = now.Sub(m.episodeStart)
	}
	return tr
}

func (m *Monitor) Verdict() judge.ThermalVerdict { return m.verdict }

func (m *Monitor) Samples() []judge.ThermalSample { return m.window.Samples() }

func (m *Monitor) Episodes() int { return m.episodes }

func (m *Monitor) ThrottledTime() time.Duration { return m.throttled }
