package report

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/spark-exporter/spark_exporter/internal/gpu/readings"
	"github.com/spark-exporter/spark_exporter/internal/gpu/thermalsampler"
	"github.com/spark-exporter/spark_exporter/internal/judge"
	"github.com/spark-exporter/spark_exporter/internal/thermallog"
)

var update = flag.Bool("update", false, "rewrite the golden reports in testdata/golden")

func TestMain(m *testing.M) {
	// Logs carry local time; the goldens are written in UTC whatever the
	// machine's zone.
	time.Local = time.UTC
	os.Exit(m.Run())
}

// One log of each accepted format: the guide's thermal-sample.sh (the
// exporter's --thermal.csv-file writes the same), the same without its
// header and with malformed lines, nvidia-smi's default CSV with units,
// and nvidia-smi's nounits CSV with columns in another order and columns
// the report skips.
var goldenLogs = map[string]string{
	"guide-format":         "../../testdata/thermal/guide-format-throttle-30s.csv",
	"guide-noheader":       "../../testdata/report/guide-noheader-malformed.csv",
	"nvidia-smi-units":     "../../testdata/thermal/nvidia-smi-default-units.csv",
	"nvidia-smi-reordered": "../../testdata/thermal/nvidia-smi-nounits-reordered.csv",
	"two-episodes":         "../../testdata/thermal/two-episodes.csv",
}

// gb10 says what the guide's logs do not: they come from a GB10.
var gb10 = LogOptions{GPUName: "NVIDIA GB10"}

func readLog(t *testing.T, path string) thermallog.Trace {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr, err := thermallog.Parse(f)
	if _, malformed := err.(thermallog.MalformedError); err != nil && !malformed {
		t.Fatal(err)
	}
	return tr
}

// The text, JSON and SVG reports of each log, against
// testdata/golden/report-NAME.{txt,json,svg}:
//
//	go test ./internal/report -run TestGolden -update
func TestGolden(t *testing.T) {
	for name, path := range goldenLogs {
		t.Run(name, func(t *testing.T) {
			r, err := FromLog(readLog(t, path), judge.DefaultThermalConfig(), gb10)
			if err != nil {
				t.Fatal(err)
			}
			for ext, write := range map[string]func(*bytes.Buffer) error{
				"txt":  func(b *bytes.Buffer) error { return r.WriteText(b) },
				"json": func(b *bytes.Buffer) error { return r.WriteJSON(b) },
				"svg":  func(b *bytes.Buffer) error { return r.WriteSVG(b) },
			} {
				var got bytes.Buffer
				if err := write(&got); err != nil {
					t.Fatal(err)
				}
				golden := filepath.Join("..", "..", "testdata", "golden", "report-"+name+"."+ext)
				if *update {
					if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
						t.Fatal(err)
					}
					continue
				}
				want, err := os.ReadFile(golden)
				if err != nil {
					t.Fatalf("%v (go test ./internal/report -run TestGolden -update writes it)", err)
				}
				if !bytes.Equal(got.Bytes(), want) {
					t.Errorf("%s differs from the report (go test ./internal/report -run TestGolden -update rewrites it):\n%s", golden, got.String())
				}
			}
		})
	}
}

// What the goldens must say, checked apart from the files so that a
// rewritten golden cannot hide a wrong report: the throttling logs throttle
// once, from the onset their comments state plus at most a window; the
// malformed lines are named by number; the SM clock falls.
func TestReportsNameTheEpisodeAndTheLines(t *testing.T) {
	cfg := judge.DefaultThermalConfig()
	r, err := FromLog(readLog(t, goldenLogs["guide-noheader"]), cfg, gb10)
	if err != nil {
		t.Fatal(err)
	}
	var lines []int
	for _, s := range r.SkippedLines {
		lines = append(lines, s.Line)
	}
	if len(lines) != 3 || lines[0] != 12 || lines[1] != 43 || lines[2] != 64 {
		t.Errorf("skipped lines %v, want the three malformed ones, 12, 43 and 64", lines)
	}
	if r.IntervalSeconds != 30 || len(r.Throttle.Episodes) != 1 {
		t.Errorf("guide log: every %vs, %d episodes; want 30 s and one", r.IntervalSeconds, len(r.Throttle.Episodes))
	}

	u, err := FromLog(readLog(t, goldenLogs["nvidia-smi-units"]), cfg, gb10)
	if err != nil {
		t.Fatal(err)
	}
	if len(u.Throttle.Episodes) != 1 {
		t.Fatalf("%d episodes, want 1", len(u.Throttle.Episodes))
	}
	// The log climbs at a flat 100 W from 15 min with its clock holding
	// (watching, not throttled); the clock falls and the
	// counters grow from 27 min.
	e := u.Throttle.Episodes[0]
	onset := u.Start.Add(27 * time.Minute)
	if e.Start.Before(onset) || e.Start.After(onset.Add(cfg.Window+2*cfg.Interval)) || !e.Open {
		t.Errorf("episode %v → %v (open %v); the log throttles from %v to its end", e.Start, e.End, e.Open, onset)
	}
	if e.SMClockBeforeHertz == nil || e.SMClockDuringHertz == nil || *e.SMClockDuringHertz >= *e.SMClockBeforeHertz {
		t.Errorf("SM clock before/during the episode: %v / %v; the log's clock falls", e.SMClockBeforeHertz, e.SMClockDuringHertz)
	}
	if e.ThermalSlowdownSeconds == nil || *e.ThermalSlowdownSeconds <= 0 {
		t.Errorf("the driver's slowdown counter grew over the episode; the report says %v", e.ThermalSlowdownSeconds)
	}
	for _, want := range []string{"throttled from 14:", "GHz at a flat 100 W: thermal, not configuration"} {
		if !strings.Contains(u.Verdict, want) {
			t.Errorf("verdict %q lacks %q", u.Verdict, want)
		}
	}
	if u.EnergyWattHours == nil || *u.EnergyWattHours < 55 || *u.EnergyWattHours > 70 {
		// 38 minutes at ≈100 W and 2 idle: ≈64 Wh.
		t.Errorf("energy %v Wh; 38 min at 100 W is about 63 Wh", u.EnergyWattHours)
	}
}

// source serves one reading per call from a trace, as NVML would at each
// sampling time; a nil entry is a failed read.
type source struct {
	readings []*readings.Reading
	i        int
}

func (s *source) Read(context.Context) ([]readings.Reading, error) {
	r := s.readings[s.i]
	s.i++
	if r == nil {
		return nil, context.DeadlineExceeded
	}
	return []readings.Reading{*r}, nil
}

// The replay test: the live sampler, driven over a trace, writes its
// --thermal.csv-file; the report of that file has the episodes the sampler
// went through, with the same start and end and the same throttled time,
// and the replay's verdict equals the sampler's at every sampling time.
// The exporter's log holds temperature and power only, so there the
// readings do too; with every field (utilisation, clocks, NVML's reasons),
// judge.ReplayThermal over the trace's own rows agrees with the sampler just
// the same.
func TestReplayAgreesWithTheLiveSampler(t *testing.T) {
	for _, name := range []string{"guide-format-throttle-30s", "two-episodes", "throttle-missed-samples", "nvml-sw-thermal", "plateau-steady"} {
		for _, full := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/full=%v", name, full), func(t *testing.T) { replayAgrees(t, name, full) })
		}
	}
}

func replayAgrees(t *testing.T, name string, full bool) {
	tr := readLog(t, filepath.Join("..", "..", "testdata", "thermal", name+".csv"))
	cfg := judge.DefaultThermalConfig()
	ss := samplesOf(tr.Rows)
	var gaps []time.Duration
	for i := 1; i < len(ss); i++ {
		gaps = append(gaps, ss[i].Time.Sub(ss[i-1].Time))
	}
	cfg.Interval, _ = medianGap(gaps)
	// The sampler is told each sampling time; a time without a row is a
	// failed read.
	var times []time.Time
	src := &source{}
	for i, row := range tr.Rows {
		if i > 0 {
			for tick := times[len(times)-1].Add(cfg.Interval); tick.Before(row.Time.Add(-cfg.Interval / 2)); tick = tick.Add(cfg.Interval) {
				times = append(times, tick)
				src.readings = append(src.readings, nil)
			}
		}
		times = append(times, row.Time)
		r := readings.Reading{Index: 0, TemperatureCelsius: row.Temperature, PowerWatts: row.Power}
		if full {
			r.Utilization, r.SMClockHertz, r.ClockEventReasons = row.Utilization, row.SMClock, row.Reasons
		}
		src.readings = append(src.readings, &r)
	}
	csv := filepath.Join(t.TempDir(), "thermal.csv")
	s := thermalsampler.NewSampler(src, cfg, csv, log.NewNopLogger())
	var live []judge.ThermalState
	var liveTimes []time.Time
	var episodes []Episode
	var prev judge.ThermalState
	for _, now := range times {
		s.Sample(context.Background(), now)
		snap := s.Snapshot()
		if len(snap.GPUs) == 0 {
			continue
		}
		state := snap.GPUs[0].Verdict.State
		switch {
		case state == judge.Throttled && prev != judge.Throttled:
			episodes = append(episodes, Episode{Start: now, End: times[len(times)-1], Open: true})
		case state != judge.Throttled && prev == judge.Throttled:
			episodes[len(episodes)-1].End, episodes[len(episodes)-1].Open = now, false
		}
		prev = state
		live, liveTimes = append(live, state), append(liveTimes, now)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	liveThrottled := s.Snapshot().GPUs[0].Throttled

	samples := samplesOf(tr.Rows)
	if !full {
		logged := readLog(t, csv)
		samples = samplesOf(logged.Rows)
		r, err := FromLog(logged, judge.DefaultThermalConfig(), gb10)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Throttle.Episodes) != len(episodes) {
			t.Fatalf("the report has %d episodes, the live sampler went through %d", len(r.Throttle.Episodes), len(episodes))
		}
		for i, e := range r.Throttle.Episodes {
			if w := episodes[i]; !e.Start.Equal(w.Start) || !e.End.Equal(w.End) || e.Open != w.Open {
				t.Errorf("episode %d: report %v → %v (open %v), live %v → %v (open %v)", i, e.Start, e.End, e.Open, w.Start, w.End, w.Open)
			}
		}
		if r.Throttle.ThrottledSeconds != liveThrottled.Seconds() {
			t.Errorf("throttled %vs in the report, %v live", r.Throttle.ThrottledSeconds, liveThrottled)
		}
	}
	var steps []judge.ThermalStep
	replayed := judge.ReplayThermal(samples, cfg, func(st judge.ThermalStep) { steps = append(steps, st) })
	if len(steps)+replayed.Skipped != len(live) {
		t.Fatalf("the replay took %d steps and skipped %d, the sampler took %d", len(steps), replayed.Skipped, len(live))
	}
	// Step for step; the sampling times the replay skips (a silence) are
	// Collecting live.
	j := 0
	for _, st := range steps {
		for ; j < len(live) && liveTimes[j].Before(st.Time); j++ {
			if live[j] != judge.Collecting {
				t.Fatalf("the replay skipped %v, where the live sampler says %s", liveTimes[j], live[j])
			}
		}
		if j == len(live) || !liveTimes[j].Equal(st.Time) {
			t.Fatalf("the replay stepped at %v, the live sampler did not", st.Time)
		}
		if st.Verdict.State != live[j] {
			t.Fatalf("at %v the replay says %s, the live sampler %s", st.Time, st.Verdict.State, live[j])
		}
		j++
	}
	if len(replayed.Episodes) != len(episodes) || replayed.Throttled != liveThrottled {
		t.Fatalf("replay: %d episodes, %v throttled; live: %d, %v", len(replayed.Episodes), replayed.Throttled, len(episodes), liveThrottled)
	}
	for i, e := range replayed.Episodes {
		if w := episodes[i]; !e.Start.Equal(w.Start) || !e.End.Equal(w.End) || e.Open != w.Open {
			t.Errorf("episode %d: replay %v → %v (open %v), live %v → %v (open %v)", i, e.Start, e.End, e.Open, w.Start, w.End, w.Open)
		}
	}
}

func samplesOf(rows []thermallog.Row) []judge.ThermalSample {
	var out []judge.ThermalSample
	for _, r := range rows {
		if s := sampleOf(r); s != nil {
			out = append(out, *s)
		}
	}
	return out
}
