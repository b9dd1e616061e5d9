package judge

import (
	"testing"
	"time"
)

// Episodes and throttled time, stepped by hand on the small window:
// throttled from the 7th sample (the window is covered and hot), out when
// power drops.
func TestMonitorEpisodes(t *testing.T) {
	cfg := smallConfig()
	m := NewThermalMonitor(cfg)
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * 10 * time.Second) }
	hot := func(i int) *ThermalSample {
		return &ThermalSample{Time: at(i), Temperature: 90, Power: 100, Utilization: ptr(0.97)}
	}
	var entered, left []int
	var episode time.Duration
	step := func(i int, s *ThermalSample) {
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
	if m.Verdict().State != Throttled || m.Episodes() != 1 || len(entered) != 1 || entered[0] != 6 {
		t.Fatalf("after 90 s hot: state %s, episodes %d, entered at %v; want throttled once, at 60 s",
			m.Verdict().State, m.Episodes(), entered)
	}
	// 60 s → 90 s throttled.
	if got := m.ThrottledTime(); got != 30*time.Second {
		t.Errorf("throttled time %v, want 30s", got)
	}
	step(10, &ThermalSample{Time: at(10), Temperature: 90, Power: 5, Utilization: ptr(0.0)})
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
	m := NewThermalMonitor(cfg)
	s := ThermalSample{Time: t0, Temperature: 70, Power: 100, Reasons: ptr(ReasonHWThermalSlowdown)}
	m.Step(t0, &s)
	if m.Verdict().State != Throttled {
		t.Fatalf("state %s, want throttled", m.Verdict().State)
	}
	tr := m.Step(t0.Add(time.Hour), nil)
	if got := m.ThrottledTime(); got != cfg.MaxGap() {
		t.Errorf("throttled time after a one-hour stall: %v, want %v", got, cfg.MaxGap())
	}
	if !tr.Left || m.Verdict().State != Collecting {
		t.Errorf("after the stall: left %v, state %s; want left, collecting", tr.Left, m.Verdict().State)
	}
}

func TestMonitorRefusesTimeGoingBack(t *testing.T) {
	m := NewThermalMonitor(smallConfig())
	m.Step(t0, &ThermalSample{Time: t0, Temperature: 40, Power: 4})
	if tr := m.Step(t0.Add(10*time.Second), &ThermalSample{Time: t0.Add(-time.Second), Temperature: 40, Power: 4}); !tr.Refused {
		t.Error("an older sample was not refused")
	}
	if m.Verdict().Samples != 1 {
		t.Errorf("%d samples analysed, want 1", m.Verdict().Samples)
	}
}

// BenchmarkMonitorStep is the live sampler's step on a full default window
// (docs/performance.md).
func BenchmarkMonitorStep(b *testing.B) {
	cfg := DefaultThermalConfig()
	m := NewThermalMonitor(cfg)
	at, i := t0, 0
	step := func() {
		i++
		at = at.Add(cfg.Interval)
		m.Step(at, &ThermalSample{Time: at, Temperature: 70 + float64(i%600)/60, Power: 100 + float64(i%3),
			Utilization: ptr(0.97), SMClock: ptr(2.45e9 - float64(i%7)*1e7)})
	}
	for range cfg.capacity() {
		step()
	}
	b.ReportAllocs()
	for b.Loop() {
		step()
	}
}
