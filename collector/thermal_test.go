package collector

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/spark-exporter/spark_exporter/internal/collected"
	"github.com/spark-exporter/spark_exporter/internal/gpu"
	"github.com/spark-exporter/spark_exporter/internal/gpu/readings"
	"github.com/spark-exporter/spark_exporter/internal/gpu/thermalsampler"
	"github.com/spark-exporter/spark_exporter/internal/judge"
	"github.com/spark-exporter/spark_exporter/internal/thermallog"
)

// fakeSource returns what next gives for each read; a nil next fails the
// read.
type fakeSource struct {
	mu   sync.Mutex
	next func() ([]readings.Reading, error)
}

func (f *fakeSource) Read(context.Context) ([]readings.Reading, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.next()
}

func (f *fakeSource) set(rs []readings.Reading, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next = func() ([]readings.Reading, error) { return rs, err }
}

func fptr(v float64) *float64 { return &v }

func reading(idx int, temp, power, util float64) readings.Reading {
	return readings.Reading{Index: idx, TemperatureCelsius: fptr(temp), PowerWatts: fptr(power), Utilization: fptr(util)}
}

// logLines splits what the collector logged; the tests step the sampler
// themselves, so nothing writes while they read.
func logLines(b *bytes.Buffer) []string {
	return strings.Split(strings.TrimSpace(b.String()), "\n")
}

// oneMinute: a one-minute window of 10 s samples keeps tests short.
func oneMinute() judge.ThermalConfig {
	cfg := judge.DefaultThermalConfig()
	cfg.Interval = 10 * time.Second
	cfg.Window = time.Minute
	return cfg
}

var start = time.Date(2025, 11, 24, 14, 0, 0, 0, time.UTC)

func tick(i int) time.Time { return start.Add(time.Duration(i) * 10 * time.Second) }

func newTestThermal(t *testing.T, src gpu.Source, csvFile string) (*thermalCollector, *bytes.Buffer) {
	t.Helper()
	logs := &bytes.Buffer{}
	c := newThermalCollector(thermalsampler.NewSampler(src, oneMinute(), csvFile, log.NewLogfmtLogger(logs)))
	t.Cleanup(func() { c.Close() })
	return c, logs
}

// The sampler, stepped by hand: a GPU on a flat 100 W plateau holding
// 90 °C becomes throttled once the window is covered, with one warning;
// power dropping ends the episode with one info line.
func TestThermalThrottleEpisode(t *testing.T) {
	src := &fakeSource{}
	c, logs := newTestThermal(t, src, "")
	ctx := context.Background()

	src.set([]readings.Reading{reading(0, 90, 100, 0.97)}, nil)
	for i := range 6 {
		c.sampler.Sample(ctx, tick(i))
	}
	got, err := collect(t, c)
	if err != nil {
		t.Fatal(err)
	}
	if got[`spark_thermal_state{gpu="0",state="collecting"}`] != 1 || got[`spark_thermal_throttle_signature{gpu="0"}`] != 0 {
		t.Errorf("at 50 s: want collecting without the signature; got %v", got)
	}
	for i := 6; i < 10; i++ {
		c.sampler.Sample(ctx, tick(i))
	}
	got, _ = collect(t, c)
	want := map[string]float64{
		`spark_thermal_state{gpu="0",state="collecting"}`:                    0,
		`spark_thermal_state{gpu="0",state="normal"}`:                        0,
		`spark_thermal_state{gpu="0",state="watching"}`:                      0,
		`spark_thermal_state{gpu="0",state="throttled"}`:                     1,
		`spark_thermal_throttle_signature{gpu="0"}`:                          1,
		`spark_thermal_window_power_mean_watts{gpu="0"}`:                     100,
		`spark_thermal_window_power_spread_watts{gpu="0"}`:                   0,
		`spark_thermal_window_temperature_slope_celsius_per_second{gpu="0"}`: 0,
		`spark_thermal_throttle_episodes_total{gpu="0"}`:                     1,
		// Throttled from the sample at 60 s to the one at 90 s.
		`spark_thermal_throttled_seconds_total{gpu="0"}`: 30,
	}
	compareSamples(t, got, want)

	// The job ends: power drops, the episode ends.
	src.set([]readings.Reading{reading(0, 88, 5, 0)}, nil)
	c.sampler.Sample(ctx, tick(10))
	got, _ = collect(t, c)
	if got[`spark_thermal_state{gpu="0",state="throttled"}`] != 0 || got[`spark_thermal_throttled_seconds_total{gpu="0"}`] != 40 ||
		got[`spark_thermal_throttle_episodes_total{gpu="0"}`] != 1 {
		t.Errorf("after the drop: %v", got)
	}

	lines := logLines(logs)
	if len(lines) != 2 {
		t.Fatalf("want exactly two log lines (enter, leave), got %d:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	for _, w := range []string{"level=warn", "GPU thermal throttling", "gpu=0", "evidence=signature",
		"temperature_celsius=90", "power_watts=100", "slope_celsius_per_minute=0", "signature_window_seconds=60"} {
		if !strings.Contains(lines[0], w) {
			t.Errorf("entering line lacks %q: %s", w, lines[0])
		}
	}
	for _, w := range []string{"level=info", "throttling ended", "gpu=0", "episode_seconds=40", "state=normal"} {
		if !strings.Contains(lines[1], w) {
			t.Errorf("leaving line lacks %q: %s", w, lines[1])
		}
	}
}

func compareSamples(t *testing.T, got, want map[string]float64) {
	t.Helper()
	for name, v := range want {
		if g, ok := got[name]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", name, g, ok, v)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("unexpected series %s", name)
		}
	}
}

// NVML reporting a thermal slowdown is evidence before the window is full.
func TestThermalNVMLSlowdown(t *testing.T) {
	src := &fakeSource{}
	c, logs := newTestThermal(t, src, "")
	r := reading(0, 80, 100, 1)
	reasons := judge.ReasonHWThermalSlowdown
	r.ClockEventReasons = &reasons
	src.set([]readings.Reading{r}, nil)
	c.sampler.Sample(context.Background(), tick(0))
	got, _ := collect(t, c)
	if got[`spark_thermal_state{gpu="0",state="throttled"}`] != 1 || got[`spark_thermal_throttle_signature{gpu="0"}`] != 0 {
		t.Errorf("want throttled by NVML, without the window's signature: %v", got)
	}
	if l := logLines(logs); len(l) != 1 || !strings.Contains(l[0], "evidence=nvml_thermal_slowdown") {
		t.Errorf("log: %q", l)
	}
}

// Reads fail and come back: the sampler carries on, logs the change twice
// (not per sample), and the window starts over after the gap.
func TestThermalReadFailuresComeAndGo(t *testing.T) {
	src := &fakeSource{}
	c, logs := newTestThermal(t, src, "")
	ctx := context.Background()
	src.set([]readings.Reading{reading(0, 40, 4, 0)}, nil)
	for i := range 7 {
		c.sampler.Sample(ctx, tick(i))
	}
	if got, _ := collect(t, c); got[`spark_thermal_state{gpu="0",state="normal"}`] != 1 {
		t.Fatalf("idle GPU after a full window: %v", got)
	}
	src.set(nil, errors.New("NVML wedged"))
	for i := 7; i < 12; i++ {
		c.sampler.Sample(ctx, tick(i))
	}
	got, _ := collect(t, c)
	if got[`spark_thermal_state{gpu="0",state="collecting"}`] != 1 {
		t.Errorf("after 50 s without readings: want collecting; %v", got)
	}
	if _, ok := got[`spark_thermal_window_power_mean_watts{gpu="0"}`]; ok {
		t.Error("a stale window still reports its power")
	}
	src.set([]readings.Reading{reading(0, 40, 4, 0)}, nil)
	for i := 12; i < 19; i++ {
		c.sampler.Sample(ctx, tick(i))
	}
	if got, _ := collect(t, c); got[`spark_thermal_state{gpu="0",state="normal"}`] != 1 {
		t.Errorf("a window after recovery: %v", got)
	}
	lines := logLines(logs)
	if len(lines) != 2 || !strings.Contains(lines[0], "level=warn") || !strings.Contains(lines[1], "level=info") {
		t.Errorf("want one warning when reads fail and one line when they return, got:\n%s", strings.Join(lines, "\n"))
	}
	if strings.Contains(strings.Join(lines, "\n"), "wedged") {
		t.Error("the source's error text reached the log")
	}
}

// Without any GPU reading there is nothing to report, which is not a
// failure, and a host that never had a GPU is no warning either: one info
// line says so.
func TestThermalNoGPU(t *testing.T) {
	src := &fakeSource{}
	src.set(nil, errors.New("NVML not available"))
	c, logs := newTestThermal(t, src, "")
	for i := range 3 {
		c.sampler.Sample(context.Background(), tick(i))
	}
	got, err := collect(t, c)
	if !errors.Is(err, errNoData) || len(got) != 0 {
		t.Errorf("got %v, %v; want no series and errNoData", got, err)
	}
	if lines := logLines(logs); len(lines) != 1 || !strings.Contains(lines[0], "level=info") {
		t.Errorf("want one info line, got:\n%s", strings.Join(lines, "\n"))
	}
}

// Values no GPU gives are neither analysed nor logged.
func TestThermalIgnoresImpossibleReadings(t *testing.T) {
	src := &fakeSource{}
	path := filepath.Join(t.TempDir(), "thermal.log")
	c, _ := newTestThermal(t, src, path)
	nan := 0.0
	nan /= nan
	src.set([]readings.Reading{
		{Index: 0, Time: tick(0), TemperatureCelsius: &nan, PowerWatts: fptr(-3)},
		{Index: 1, Time: tick(0), TemperatureCelsius: fptr(50), PowerWatts: fptr(60), Utilization: fptr(7)},
	}, nil)
	c.sampler.Sample(context.Background(), tick(0))
	got, _ := collect(t, c)
	if _, ok := got[`spark_thermal_state{gpu="0",state="collecting"}`]; ok {
		t.Error("GPU 0 gave no usable value but has a window")
	}
	if got[`spark_thermal_window_power_mean_watts{gpu="1"}`] != 60 {
		t.Errorf("GPU 1: %v", got)
	}
	c.Close()
	data, _ := os.ReadFile(path)
	tr, err := thermallog.Parse(bytes.NewReader(data))
	if err != nil || len(tr.Rows) != 1 {
		t.Fatalf("log %q: %v", data, err)
	}
}

// The CSV log: nvidia-smi's header once, a row per sample, kept across a
// restart; an unwritable file is counted and logged once, and the
// collector keeps working.
func TestThermalCSV(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "thermal.log")
	src := &fakeSource{}
	src.set([]readings.Reading{{Index: 0, Time: time.Date(2025, 11, 24, 14, 8, 55, 751e6, time.Local),
		TemperatureCelsius: fptr(38), PowerWatts: fptr(12.34)}}, nil)
	for range 2 { // two exporter runs
		c, _ := newTestThermal(t, src, path)
		c.sampler.Sample(context.Background(), tick(0))
		c.sampler.Sample(context.Background(), tick(1))
		if got, _ := collect(t, c); got["spark_thermal_csv_write_errors_total"] != 0 {
			t.Errorf("write errors: %v", got["spark_thermal_csv_write_errors_total"])
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	data, _ := os.ReadFile(path)
	row := "2025/11/24 14:08:55.751, 38, 12.34 W\n"
	if want := "timestamp,temperature.gpu,power.draw\n" + strings.Repeat(row, 4); string(data) != want {
		t.Errorf("log:\n%s\nwant:\n%s", data, want)
	}

	missing := filepath.Join(dir, "no-such-dir", "thermal.log")
	c, logs := newTestThermal(t, src, missing)
	for i := range 3 {
		c.sampler.Sample(context.Background(), tick(i))
	}
	got, err := collect(t, c)
	if err != nil || got["spark_thermal_csv_write_errors_total"] != 3 ||
		math.Abs(got[`spark_thermal_window_power_mean_watts{gpu="0"}`]-12.34) > 1e-9 {
		t.Errorf("unwritable log: %v, %v; want 3 errors counted and the GPU still reported", got, err)
	}
	lines := logLines(logs)
	if len(lines) != 1 || !strings.Contains(lines[0], "--thermal.csv-file") {
		t.Errorf("want one log line for the unwritable file, got:\n%s", strings.Join(lines, "\n"))
	}
	if strings.Contains(lines[0], dir) {
		t.Errorf("the log line names the path: %s", lines[0])
	}
}

// gatedSource blocks each read until the test lets it through or the
// read's context ends.
type gatedSource struct {
	reads chan struct{} // a read started
	gate  chan struct{}
}

func (g *gatedSource) Read(ctx context.Context) ([]readings.Reading, error) {
	g.reads <- struct{}{}
	select {
	case <-g.gate:
		return []readings.Reading{reading(0, 40, 4, 0)}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// The background sampler samples at once, and Close stops it even in the
// middle of a wedged read, and is safe to repeat. NVML is not the
// collector's: Close leaves it to whoever opened it (serve, after every
// collector is closed).
func TestThermalSamplerStopsOnClose(t *testing.T) {
	src := &gatedSource{reads: make(chan struct{}, 1), gate: make(chan struct{})}
	cfg := oneMinute()
	cfg.Interval = time.Hour // only the first, immediate sample happens
	c := newThermalCollector(thermalsampler.NewSampler(src, cfg, "", log.NewNopLogger()))
	c.start()
	select {
	case <-src.reads:
	case <-time.After(30 * time.Second):
		t.Fatal("the sampler did not read within 30s of starting")
	}
	closed := make(chan error)
	go func() { closed <- c.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Error(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Close did not return within 30s while a read was wedged")
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	// The wedged read was interrupted, not left running: the sampler
	// counts it as a sample taken.
	if n := c.sampler.Snapshot().Samples; n != 1 {
		t.Errorf("%d samples after Close, want the one interrupted", n)
	}
}

// The flags' defaults are judge.DefaultThermalConfig, the configuration
// docs/thermal.md justifies, written into each flag's default and read back
// unchanged; a bad value is refused naming its flag.
func TestThermalFlags(t *testing.T) {
	app := kingpin.New("t", "")
	flags := addThermalFlags(app)
	if _, err := app.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if got, want := flags.config(), judge.DefaultThermalConfig(); got != want {
		t.Errorf("defaults %+v, want %+v", got, want)
	}
	// As --help shows them, and as METRICS.md and docs/thermal.md give them.
	for flag, want := range map[string]string{"thermal.interval": "5s", "thermal.window": "10m",
		"thermal.climbing-slope": "0.5", "thermal.below-nominal-ratio": "0.9", "thermal.nominal-power": "240"} {
		if got := app.GetFlag(flag).Model().Default; len(got) != 1 || got[0] != want {
			t.Errorf("--%s default %q, want %q", flag, got, want)
		}
	}

	for _, tc := range []struct{ arg, want string }{
		{"--thermal.busy-utilization=2", "--thermal.busy-utilization"},
		{"--thermal.window=soon", "--thermal.window"},
		{"--thermal.hot-temperature=NaN", "--thermal.hot-temperature"},
	} {
		app := kingpin.New("t", "")
		addThermalFlags(app)
		if _, err := app.Parse([]string{tc.arg}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v", tc.arg, err)
		}
	}
}

// A window shorter than three intervals stops the exporter at start, with
// the flags named.
func TestThermalFactoryRefusesAShortWindow(t *testing.T) {
	app := kingpin.New("t", "")
	sel := AddFlags(app)
	if _, err := app.Parse([]string{"--thermal.window=10s", "--thermal.interval=5s"}); err != nil {
		t.Fatal(err)
	}
	_, err := sel.Build(Env{ProcFS: t.TempDir(), SysFS: t.TempDir(), Logger: log.NewNopLogger(), NVML: &fakeNVML{}})
	if err == nil || !strings.Contains(err.Error(), "--thermal") {
		t.Errorf("error %v; want one naming the --thermal flags", err)
	}
}

// The collector's descriptors carry the names of docs/metrics.md.
func TestThermalMetricNames(t *testing.T) {
	for _, d := range []*prometheus.Desc{thermalStateDesc, thermalSignatureDesc, thermalPowerMeanDesc,
		thermalSpreadDesc, thermalSlopeDesc, thermalEpisodesDesc, thermalSecondsDesc} {
		if !strings.Contains(d.String(), `"spark_thermal_`) {
			t.Errorf("%s", d)
		}
	}
}

// GB10 throttling as real units show it: every flag clear while the thermal
// slowdown counters grow. That is evidence at once, and the episode log
// names it and the seconds of slowdown and of power capping in the window.
func TestThermalCounterSlowdown(t *testing.T) {
	src := &fakeSource{}
	c, logs := newTestThermal(t, src, "")
	ctx := context.Background()
	clear := uint64(0)
	at := func(slowdown, powerCap float64) readings.Reading {
		r := reading(0, 81, 100, 0.97)
		r.ClockEventReasons = &clear
		r.ClockEventSeconds = map[string]float64{"sw_power_cap": powerCap, "sw_thermal_slowdown": slowdown, "hw_thermal_slowdown": 1}
		return r
	}
	// Only the power cap grows: the platform cap, not throttling.
	for i, capped := range []float64{100, 110} {
		src.set([]readings.Reading{at(0.9, capped)}, nil)
		c.sampler.Sample(ctx, tick(i))
	}
	if got, _ := collect(t, c); got[`spark_thermal_state{gpu="0",state="throttled"}`] != 0 {
		t.Fatalf("throttled on the power cap counter alone: %v", got)
	}
	// The SW thermal slowdown counter grows 3.5 s in one interval.
	src.set([]readings.Reading{at(4.4, 120)}, nil)
	c.sampler.Sample(ctx, tick(2))
	got, _ := collect(t, c)
	if got[`spark_thermal_state{gpu="0",state="throttled"}`] != 1 || got[`spark_thermal_throttle_signature{gpu="0"}`] != 0 {
		t.Errorf("want throttled by the counters, without the signature: %v", got)
	}
	l := logLines(logs)
	if len(l) != 1 {
		t.Fatalf("log: %q", l)
	}
	for _, w := range []string{"evidence=thermal_slowdown_counters", "window_thermal_slowdown_seconds=3.5", "window_power_cap_seconds=20"} {
		if !strings.Contains(l[0], w) {
			t.Errorf("entering line lacks %q: %s", w, l[0])
		}
	}
}

// The status page shows the snapshot the latest scrape rendered, not one the
// sampler took after it: the page and /metrics say the same.
func TestThermalSnapshotIsTheRenderedOne(t *testing.T) {
	src := &fakeSource{}
	c, _ := newTestThermal(t, src, "")
	c.results = &collected.Results{}
	e := NewExporter(map[string]Collector{"thermal": c}, c.results, nopLogger())
	ctx := context.Background()
	src.set([]readings.Reading{reading(0, 90, 100, 0.97)}, nil)
	c.sampler.Sample(ctx, tick(0))
	if th := e.State().Thermal; th != nil {
		t.Fatalf("before any scrape: a snapshot of %d samples, want none (the page runs the collectors)", th.Snapshot.Samples)
	}
	got, err := collect(t, c)
	if err != nil {
		t.Fatal(err)
	}
	c.sampler.Sample(ctx, tick(1)) // after the scrape
	th := e.State().Thermal
	if th == nil || th.Snapshot.Samples != 1 || len(th.Snapshot.GPUs) != 1 || len(th.Snapshot.GPUs[0].Window) != 1 {
		t.Fatalf("snapshot %+v, want the one the scrape rendered", th)
	}
	snap := th.Snapshot
	if state := string(snap.GPUs[0].Verdict.State); got[`spark_thermal_state{gpu="0",state="`+state+`"}`] != 1 {
		t.Errorf("the snapshot's state %q is not the one /metrics rendered: %v", state, got)
	}
}
