package judge

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/thermallog"
)

// A trace in testdata/thermal is a thermal log (thermallog's CSV) whose
// comment lines state what the analysis must conclude:
//
//	# interval: 5s            sampling interval (the window is the default 10m)
//	# expect: throttled       or no-throttle: no throttled state at any time
//	# onset: 15m              when the throttling starts in the trace (throttled only)
//	# episodes: 1             entries into throttled over the whole trace
//	# state 14m: normal       the state at that time into the trace
type expectation struct {
	interval  time.Duration
	throttled bool
	onset     time.Duration
	episodes  int
	states    map[time.Duration]ThermalState
}

func parseExpectation(comments []string) (expectation, error) {
	e := expectation{states: map[time.Duration]ThermalState{}, episodes: -1}
	var sawExpect bool
	for _, c := range comments {
		key, value, ok := strings.Cut(c, ":")
		if !ok {
			continue
		}
		value = strings.TrimSpace(value)
		var err error
		switch {
		case key == "interval":
			e.interval, err = time.ParseDuration(value)
		case key == "expect":
			sawExpect = true
			switch value {
			case "throttled":
				e.throttled = true
			case "no-throttle":
			default:
				err = fmt.Errorf("expect: %q is neither throttled nor no-throttle", value)
			}
		case key == "onset":
			e.onset, err = time.ParseDuration(value)
		case key == "episodes":
			e.episodes, err = strconv.Atoi(value)
		case strings.HasPrefix(key, "state "):
			var at time.Duration
			at, err = time.ParseDuration(strings.TrimPrefix(key, "state "))
			e.states[at] = ThermalState(value)
		}
		if err != nil {
			return e, err
		}
	}
	switch {
	case e.interval <= 0:
		return e, fmt.Errorf("no interval")
	case !sawExpect:
		return e, fmt.Errorf("no expect line")
	case e.throttled && e.onset == 0:
		return e, fmt.Errorf("a throttling trace needs its onset")
	case e.episodes < 0:
		return e, fmt.Errorf("no episodes line")
	}
	return e, nil
}

// tracedStep is one step of the replay.
type tracedStep struct {
	at    time.Duration // since the trace's first row
	state ThermalState
	tr    ThermalTransition
}

// replayResult is what the monitor made of a trace.
type replayResult struct {
	steps          []tracedStep
	firstThrottled time.Duration // -1 when never
	episodes       int
	throttled      time.Duration // the monitor's own count
	episodeTime    time.Duration // the sum of the episodes it reported, open one to the end
	duration       time.Duration
}

// replay feeds a trace's samples to ReplayThermal, which steps a ThermalMonitor as the
// collector would: one step per sample, and one empty step per sampling
// time without one (NVML silent, or a row without temperature or power).
func replay(rows []thermallog.Row, cfg ThermalConfig) replayResult {
	res := replayResult{firstThrottled: -1}
	start := rows[0].Time
	var samples []ThermalSample
	for _, r := range rows {
		if s := rowSample(r); s != nil {
			samples = append(samples, *s)
		}
	}
	var entered time.Duration
	replayed := ReplayThermal(samples, cfg, func(st ThermalStep) {
		at := st.Time.Sub(start)
		res.steps = append(res.steps, tracedStep{at, st.Verdict.State, st.Transition})
		if st.Verdict.State == Throttled && res.firstThrottled < 0 {
			res.firstThrottled = at
		}
		if st.Transition.Entered {
			entered = at
		}
		if st.Transition.Left {
			res.episodeTime += st.Transition.Episode
		}
	})
	last := res.steps[len(res.steps)-1]
	if last.state == Throttled {
		res.episodeTime += last.at - entered
	}
	res.episodes = len(replayed.Episodes)
	res.throttled = replayed.Throttled
	res.duration = last.at
	return res
}

// rowSample is the sample a row gives, nil when temperature or power is
// missing (as the collector does with a reading; report's rule).
func rowSample(r thermallog.Row) *ThermalSample {
	if r.Temperature == nil || r.Power == nil {
		return nil
	}
	return &ThermalSample{Time: r.Time, Temperature: *r.Temperature, Power: *r.Power,
		SMClock: r.SMClock, Utilization: r.Utilization, Reasons: r.Reasons,
		ThermalSlowdownSeconds: ThermalSlowdownSeconds(r.EventSeconds), PowerCapSeconds: PowerCapSeconds(r.EventSeconds)}
}

// stateAt is the state of the last step at or before at.
func (r replayResult) stateAt(at time.Duration) (ThermalState, bool) {
	i := sort.Search(len(r.steps), func(i int) bool { return r.steps[i].at > at })
	if i == 0 {
		return "", false
	}
	return r.steps[i-1].state, true
}

// TestCorpus replays every trace of testdata/thermal and checks its
// verdicts; with -v it prints the detection report of docs/thermal.md:
//
//	go test ./internal/judge -run TestCorpus -v
func TestCorpus(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(corpusDir, "*.csv"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no traces in %s: %v", corpusDir, err)
	}
	var report []string
	var throttling, detected, falsePositives int
	var worstDelay time.Duration
	for _, path := range paths {
		name := strings.TrimSuffix(filepath.Base(path), ".csv")
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := thermallog.Parse(f)
		f.Close()
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		want, err := parseExpectation(tr.Comments)
		if err != nil {
			t.Errorf("%s: expectations: %v", name, err)
			continue
		}
		cfg := DefaultThermalConfig()
		cfg.Interval = want.interval
		res := replay(tr.Rows, cfg)
		target := cfg.Window + 2*cfg.Interval

		line := fmt.Sprintf("%-28s %-11s", name, map[bool]string{true: "throttling", false: "no-throttle"}[want.throttled])
		switch {
		case want.throttled && res.firstThrottled < 0:
			throttling++
			t.Errorf("%s: throttling from %v never detected", name, want.onset)
			line += "  NOT DETECTED"
		case want.throttled:
			throttling++
			detected++
			delay := res.firstThrottled - want.onset
			worstDelay = max(worstDelay, delay)
			if delay < 0 || delay > target {
				t.Errorf("%s: detected at %v, %v after the onset at %v; want within [0, %v]",
					name, res.firstThrottled, delay, want.onset, target)
			}
			line += fmt.Sprintf("  onset %-5v detected %-6v delay %-6v (target ≤ %v)", want.onset, res.firstThrottled, delay, target)
		case res.firstThrottled >= 0:
			falsePositives++
			t.Errorf("%s: throttled at %v in a trace that never throttles", name, res.firstThrottled)
			line += fmt.Sprintf("  FALSE throttled at %v", res.firstThrottled)
		default:
			line += "  no throttled state"
		}
		line += fmt.Sprintf("  episodes %d  throttled %.0f%% of %v", res.episodes,
			100*res.throttled.Seconds()/res.duration.Seconds(), res.duration)
		report = append(report, line)

		if res.episodes != want.episodes {
			t.Errorf("%s: %d episodes, want %d", name, res.episodes, want.episodes)
		}
		// The counter agrees with the episodes the monitor reported.
		if res.throttled != res.episodeTime {
			t.Errorf("%s: throttled time %v, but the episodes add up to %v", name, res.throttled, res.episodeTime)
		}
		for at, state := range want.states {
			got, ok := res.stateAt(at)
			if !ok || got != state {
				t.Errorf("%s: state at %v is %q, want %q", name, at, got, state)
			}
		}
	}
	t.Logf("thermal corpus report (window %v, 5s traces unless noted):\n%s\n"+
		"throttling traces detected: %d of %d, worst delay after onset %v; false throttled on non-throttling traces: %d",
		DefaultThermalConfig().Window, strings.Join(report, "\n"), detected, throttling, worstDelay, falsePositives)
}
