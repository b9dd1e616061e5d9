package thermal

import (
	"testing"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/judge"
)

// Episodes and throttled time, stepped by hand on the small window:
// throttled from the 7th sample (the window is covered and hot), out when
// power drops.
func TestMonitorEpisodes(t *testing.T) {
	cfg := smallConfig()
	m := NewMonitor(cfg)
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * 10 * time.Second) }
	hot := func(i int) *judge.ThermalSample {
		return &judge.ThermalSample{Time: at(i), Temperature: 90, Power: 100, Utilization: ptr(0.97)}
	}
	var entered, left []int
	var episode time.Duration
	step := func(i int, s *judge.ThermalSample) {
		tr := m.Step(at(i), s)
		if tr.Entered {
			entered = append(entered, i)
		}
		if tr.Left {
			left = append(left, i)
			episode = tr.Episode
		}
	}
	for i := range 10 { // 0 s … 90 s
		step(i, hot(i))
	}
	if m.Verdict().State != judge.Throttled || m.Episodes() != 1 || len(entered) != 1 || entered[0] != 6 {
		t.Fatalf("after 90 s hot: state %s, episodes %d, entered at %v; want throttled once, at 60 s",
			m.Verdict().State, m.Episodes(), entered)
	}
	// 60 s → 90 s throttled.
	if got := m.ThrottledTime(); got != 30*time.Second {
		t.Errorf("throttled time %v, want 30s", got)
	}
	step(10, &judge.ThermalSample{Time: at(10), Temperature: 90, Power: 5, Utilization: ptr(0.0)})
	if len(left) != 1 || left[0] != 10 || episode != 40*time.Second {
		t.Errorf("left at %v after an episode of %v; want at 100 s after 40s", left, episode)
	}
	if got := m.ThrottledTime(); got != 40*time.Second {
		t.Errorf("throttled time %v, want 40s", got)
	}
	// Counters only grow: further normal steps add nothing.
	step(11, nil)
	if m.ThrottledTime() != 40*time.Second || m.Episodes() != 1 {
		t.Errorf("after leaving: %v, %d episodes", m.ThrottledTime(), m.Episodes())
	}
}

// A sampler that stalls while throttled counts at most a gap of it: nobody
// saw the rest.
func TestMonitorCapsAStalledStep(t *testing.T) {
	cfg := smallConfig()
	m := NewMonitor(cfg)
	s := judge.ThermalSample{Time: t0, Temperature: 70, Power: 100, Reasons: ptr(judge.ReasonHWThermalSlowdown)}
	m.Step(t0, &s)
	if m.Verdict().State != judge.Throttled {
		t.Fatalf("state %s, want throttled", m.Verdict().State)
	}
	tr := m.Step(t0.Add(time.Hour), nil)
	if got := m.ThrottledTime(); got != cfg.MaxGap() {
		t.Errorf("throttled time after a one-hour stall: %v, want %v", got, cfg.MaxGap())
	}
	if !tr.Left || m.Verdict().State != judge.Collecting {
		t.Errorf("after the stall: left %v, state %s; want left, collecting", tr.Left, m.Verdict().State)
	}
}

func TestMonitorRefusesTimeGoingBack(t *testing.T) {
	m := NewMonitor(smallConfig())
	m.Step(t0, &judge.ThermalSample{Time: t0, Temperature: 40, Power: 4})
	if tr := m.Step(t0.Add(10*time.Second), &judge.ThermalSample{Time: t0.Add(-time.Second), Temperature: 40, Power: 4}); !tr.Refused {
		t.Error("an older sample was not refused")
	}
	if m.Verdict().Samples != 1 {
		t.Errorf("%d samples analysed, want 1", m.Verdict().Samples)
	}
}

var t0 = time.Date(2025, 11, 24, 14, 0, 0, 0, time.UTC)

func ptr[T any](v T) *T { return &v }

// A small window keeps the tests short: one minute of 10 s samples.
func smallConfig() judge.ThermalConfig {
	cfg := judge.DefaultThermalConfig()
	cfg.Window = time.Minute
	cfg.Interval = 10 * time.Second
	return cfg
}
