package judge

import (
	"testing"
	"time"
)

// replaySteps is ReplayThermal with the record of every step it took.
func replaySteps(samples []ThermalSample, cfg ThermalConfig) ([]ThermalStep, ThermalReplayed) {
	var steps []ThermalStep
	res := ReplayThermal(samples, cfg, func(s ThermalStep) { steps = append(steps, s) })
	return steps, res
}

// everyStep steps a ThermalMonitor at every sampling time, as the Sampler does
// live: each sample's time, and each time cfg.Interval after the previous
// step that brought no sample. Samples not later than the previous step
// are left out, as ReplayThermal leaves them.
func everyStep(samples []ThermalSample, cfg ThermalConfig) ([]ThermalStep, *ThermalMonitor) {
	m := NewThermalMonitor(cfg)
	var steps []ThermalStep
	step := func(now time.Time, s *ThermalSample) {
		tr := m.Step(now, s)
		steps = append(steps, ThermalStep{Time: now, Sample: s, Verdict: m.Verdict(), Transition: tr})
	}
	for i := range samples {
		if len(steps) > 0 {
			prev := steps[len(steps)-1].Time
			if !samples[i].Time.After(prev) {
				continue
			}
			for tick := prev.Add(cfg.Interval); tick.Before(samples[i].Time.Add(-cfg.Interval / 2)); tick = tick.Add(cfg.Interval) {
				step(tick, nil)
			}
		}
		step(samples[i].Time, &samples[i])
	}
	return steps, m
}

// ReplayThermal skips only sampling times whose verdict is Collecting with
// nothing recent, and agrees with a ThermalMonitor stepped at every sampling time
// at each step it takes: verdict, transition, episodes, throttled time.
// The samples hold the GPU throttled (the driver's HW slowdown) across
// silences of 1, 3, 4, 5 and 60 missed samples, 1 hour and 3 s, and a day,
// with a sample at the previous one's time and one before it.
func TestReplayAgreesWithEveryStep(t *testing.T) {
	cfg := smallConfig()
	var samples []ThermalSample
	at := t0
	add := func(n int) {
		for range n {
			samples = append(samples, ThermalSample{Time: at, Temperature: 70, Power: 100,
				Utilization: ptr(0.97), Reasons: ptr(ReasonHWThermalSlowdown)})
			at = at.Add(cfg.Interval)
		}
	}
	add(10)
	for _, silence := range []time.Duration{cfg.Interval, 3 * cfg.Interval, 4 * cfg.Interval, 5 * cfg.Interval,
		60 * cfg.Interval, time.Hour + 3*time.Second, 24 * time.Hour} {
		at = at.Add(silence)
		add(10)
	}
	last := samples[len(samples)-1]
	samples = append(samples, last, ThermalSample{Time: last.Time.Add(-time.Second), Temperature: 90, Power: 100})
	at = at.Add(cfg.Interval)
	add(3)

	want, m := everyStep(samples, cfg)
	got, res := replaySteps(samples, cfg)
	if res.Steps != len(got) || res.Steps+res.Skipped != len(want) || res.Refused != 2 {
		t.Fatalf("%d Steps (%d reported), %d skipped, %d refused; the ThermalMonitor took %d Steps, 2 samples left out",
			len(got), res.Steps, res.Skipped, res.Refused, len(want))
	}
	if len(got) > len(want)/10 {
		t.Errorf("%d Steps of %d: the silences were stepped through", len(got), len(want))
	}
	j := 0
	for _, g := range got {
		for ; j < len(want) && want[j].Time.Before(g.Time); j++ {
			if v := want[j].Verdict; v.State != Collecting || v.Latest != nil {
				t.Fatalf("skipped %v, where the ThermalMonitor is %s", want[j].Time.Sub(t0), v.State)
			}
		}
		if j == len(want) || !want[j].Time.Equal(g.Time) {
			t.Fatalf("a ThermalStep at %v, where the ThermalMonitor took none", g.Time.Sub(t0))
		}
		w := want[j]
		if g.Sample != w.Sample || g.Transition != w.Transition || g.Verdict.State != w.Verdict.State ||
			g.Verdict.Samples != w.Verdict.Samples || g.Verdict.Span != w.Verdict.Span || g.Verdict.Evidence() != w.Verdict.Evidence() {
			t.Fatalf("at %v: replay %s %+v (%d samples, %v, %s), ThermalMonitor %s %+v (%d samples, %v, %s)", g.Time.Sub(t0),
				g.Verdict.State, g.Transition, g.Verdict.Samples, g.Verdict.Span, g.Verdict.Evidence(),
				w.Verdict.State, w.Transition, w.Verdict.Samples, w.Verdict.Span, w.Verdict.Evidence())
		}
		j++
	}
	if res.Throttled != m.ThrottledTime() || len(res.Episodes) != m.Episodes() {
		t.Errorf("replay: %v throttled, %d episodes; monitor: %v, %d", res.Throttled, len(res.Episodes), m.ThrottledTime(), m.Episodes())
	}
	// The episodes run from the step that entered Throttled to the one
	// that left it, the last open to the end.
	var episodes []ThermalEpisode
	for _, w := range want {
		if w.Transition.Entered {
			episodes = append(episodes, ThermalEpisode{Start: w.Time, Open: true})
		}
		if w.Transition.Left {
			e := &episodes[len(episodes)-1]
			e.End, e.Open = w.Time, false
		}
	}
	episodes[len(episodes)-1].End = want[len(want)-1].Time
	// The first, and one after each silence of 4 missed samples or more:
	// 40 s after the last sample is past the 30 s gap.
	if len(res.Episodes) != len(episodes) || len(episodes) != 6 {
		t.Fatalf("%d episodes, the ThermalMonitor went through %d; want 6", len(res.Episodes), len(episodes))
	}
	for i, e := range res.Episodes {
		w := episodes[i]
		if !e.Start.Equal(w.Start) || !e.End.Equal(w.End) || e.Open != w.Open || e.Evidence() != "nvml_thermal_slowdown" {
			t.Errorf("episode %d: %v → %v (open %v, %s); the ThermalMonitor %v → %v (open %v)", i,
				e.Start.Sub(t0), e.End.Sub(t0), e.Open, e.Evidence(), w.Start.Sub(t0), w.End.Sub(t0), w.Open)
		}
	}
}

// A silence longer than a time.Duration (year 1 to 2500) costs a few
// Steps, and every sampling time is still accounted for.
func TestReplaySilenceLongerThanADuration(t *testing.T) {
	cfg := smallConfig()
	first, second := time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2500, 1, 1, 0, 0, 0, 0, time.UTC)
	samples := []ThermalSample{{Time: first, Temperature: 40, Power: 5}, {Time: second, Temperature: 40, Power: 5}}
	steps, res := replaySteps(samples, cfg)
	// Sampling times: both samples', and first + k × 10 s for every k ≥ 1
	// with k × 10 s < the gap − 5 s.
	gap := second.Unix() - first.Unix()
	want := 2 + int((gap-6)/10)
	if res.Steps > 20 || res.Steps+res.Skipped != want {
		t.Errorf("%d Steps and %d skipped, want %d sampling times in a few Steps", res.Steps, res.Skipped, want)
	}
	if last := steps[len(steps)-1]; !last.Time.Equal(second) || last.Sample == nil || last.Verdict.Samples != 1 {
		t.Errorf("last ThermalStep at %v, %d samples analysed; want the second sample's, alone", last.Time, last.Verdict.Samples)
	}
}
