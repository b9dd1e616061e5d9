package thermal

import (
	"time"

	"github.com/spark-exporter/spark_exporter/internal/judge"
)

// Monitor follows one GPU: its window of samples, the latest verdict, and
// the throttle episodes so far. The sampler calls Step once per interval,
// and Replay steps one over a log; time only moves when Step is told it
// does. A Step costs one analysis of the window and no copy of it.
type Monitor struct {
	cfg     judge.ThermalConfig
	window  *Window
	verdict judge.ThermalVerdict
	stepped bool
	last    time.Time // time of the previous Step

	episodes     int
	throttled    time.Duration
	episodeStart time.Time
}

// NewMonitor starts a GPU's monitor with a configuration that has passed
// Validate.
func NewMonitor(cfg judge.ThermalConfig) *Monitor {
	return &Monitor{cfg: cfg, window: NewWindow(cfg.Capacity()), verdict: judge.ThermalVerdict{State: judge.Collecting}}
}

// Transition says what a Step changed.
type Transition struct {
	Entered bool // the GPU entered Throttled
	Left    bool // the GPU left Throttled
	// Episode is, on leaving, how long the episode lasted.
	Episode time.Duration
	// Refused is set when the sample was not later than the previous one
	// and was left out.
	Refused bool
}

// Step adds s (nil when no reading came this time) and judges the window
// at now.
func (m *Monitor) Step(now time.Time, s *judge.ThermalSample) Transition {
	var tr Transition
	if s != nil {
		tr.Refused = m.window.Add(*s) != nil
	}
	was := m.verdict.State
	if m.stepped && was == judge.Throttled {
		// The state held from the previous step until now. A long stall
		// of the sampler itself counts for at most a gap: nobody saw
		// what happened meanwhile.
		m.throttled += min(now.Sub(m.last), m.cfg.MaxGap())
	}
	m.verdict = judge.AnalyzeThermalAfter(m.window.view(), now, m.verdict, m.cfg)
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

// Verdict is the verdict of the latest Step.
func (m *Monitor) Verdict() judge.ThermalVerdict { return m.verdict }

// Samples is a copy of the window's samples as the latest Step analysed
// them, oldest first: the caller may keep it (a snapshot does).
func (m *Monitor) Samples() []judge.ThermalSample { return m.window.Samples() }

// Episodes is the number of entries into Throttled.
func (m *Monitor) Episodes() int { return m.episodes }

// ThrottledTime is the time spent Throttled, up to the latest Step.
func (m *Monitor) ThrottledTime() time.Duration { return m.throttled }
