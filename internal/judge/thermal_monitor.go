package judge

import (
	"time"
)

// ThermalMonitor steps the thermal verdict over time, live or over a log; its time moves only when Step
// says so, so that ReplayThermal steps a log as the sampler steps live readings.
type ThermalMonitor struct {
	cfg     ThermalConfig
	window  *thermalWindow
	verdict ThermalVerdict
	stepped bool
	last    time.Time // time of the previous Step

	episodes     int
	throttled    time.Duration
	episodeStart time.Time
}

// NewThermalMonitor starts a monitor whose verdicts' figures are exact; cfg must have passed Validate.
func NewThermalMonitor(cfg ThermalConfig) *ThermalMonitor { return newThermalMonitor(cfg, true) }

func newThermalMonitor(cfg ThermalConfig, exact bool) *ThermalMonitor {
	return &ThermalMonitor{cfg: cfg, window: newThermalWindow(cfg, cfg.capacity(), exact), verdict: ThermalVerdict{State: Collecting}}
}

type ThermalTransition struct {
	Entered bool // the GPU entered Throttled
	Left    bool // the GPU left Throttled
	Episode time.Duration
	Refused bool
}

// Step: s is nil when no reading came.
func (m *ThermalMonitor) Step(now time.Time, s *ThermalSample) ThermalTransition {
	var tr ThermalTransition
	if s != nil {
		tr.Refused = m.window.add(*s) != nil
	}
	was := m.verdict.State
	if m.stepped && was == Throttled {
		// A stall of the sampler counts for at most a gap: nobody saw
		// what happened meanwhile.
		m.throttled += min(now.Sub(m.last), m.cfg.MaxGap())
	}
	m.verdict = m.window.analyze(now, m.verdict)
	m.stepped = true
	m.last = now

	switch is := m.verdict.State; {
	case is == Throttled && was != Throttled:
		m.episodes++
		m.episodeStart = now
		tr.Entered = true
	case is != Throttled && was == Throttled:
		tr.Left = true
		tr.Episode = now.Sub(m.episodeStart)
	}
	return tr
}

func (m *ThermalMonitor) Verdict() ThermalVerdict { return m.verdict }

func (m *ThermalMonitor) Samples() []ThermalSample { return m.window.samples() }

func (m *ThermalMonitor) Episodes() int { return m.episodes }

func (m *ThermalMonitor) ThrottledTime() time.Duration { return m.throttled }
