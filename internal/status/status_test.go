package status

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/collected"
	"github.com/spark-exporter/spark_exporter/internal/gpu/readings"
	"github.com/spark-exporter/spark_exporter/internal/hostfs"
	"github.com/spark-exporter/spark_exporter/internal/judge"
	"github.com/spark-exporter/spark_exporter/internal/plan"
	"github.com/spark-exporter/spark_exporter/internal/pool"
	"github.com/spark-exporter/spark_exporter/internal/testing/jsonschema"
	"github.com/spark-exporter/spark_exporter/internal/workload"
)

var now = time.Date(2025, 11, 24, 14, 0, 0, 0, time.UTC)

// sparkState is what the collectors find on the Spark fixture (the one the
// golden /metrics is scraped from): its meminfo, its processes, its plan
// file, and the GB10 reading the stand-in NVML gives, each collector
// successful, at now.
func sparkState(t testing.TB) collected.State {
	t.Helper()
	root := filepath.Join("..", "..", "testdata")
	proc := hostfs.New(filepath.Join(root, "proc", "spark"))
	meminfo, err := proc.ReadFile("meminfo", nil)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := pool.Parse(meminfo)
	if err != nil {
		t.Fatal(err)
	}
	res, err := workload.NewScanner(proc, nil).Scan(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	named, err := plan.LoadFile(filepath.Join(root, "plans", "spark.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var plans []collected.Plan
	for _, p := range named {
		e, err := p.Plan.Estimate()
		if err != nil {
			t.Fatal(err)
		}
		plans = append(plans, collected.Plan{Name: p.Name, PeakBytes: e.Peak})
	}
	f := func(x float64) *float64 { return &x }
	swPowerCap := uint64(0x4)
	st := collected.State{At: now, Pool: &collected.Pool{Snapshot: snap, Reserve: 4 << 30}, Workloads: &res, Plans: plans,
		GPU: &collected.GPU{Loaded: true, Snapshot: readings.Snapshot{Devices: []readings.Reading{{Index: 0, Name: "NVIDIA GB10",
			TemperatureCelsius: f(90), PowerWatts: f(99.3), SMClockHertz: f(1.833e9), SMClockMaxHertz: f(3.003e9), Utilization: f(0.97),
			ClockEventReasons: &swPowerCap}}}}}
	for _, name := range []string{"gpu", "plan", "platform", "pool", "thermal", "workloads"} {
		st.Runs = append(st.Runs, collected.Run{Name: name, Success: true, Duration: time.Millisecond})
	}
	return st
}

func TestBuildFromSparkState(t *testing.T) {
	m := buildModel(BuildInfo{}, sparkState(t))
	p := m.Pool
	if p == nil {
		t.Fatal("no pool")
	}
	// The figures of testdata/golden/spark.metrics.
	if p.FreeBytes != 21990232064 || p.HeadroomBytes != 17695264768 || p.HeadroomAfterFlushBytes != 40243843072 {
		t.Errorf("pool figures differ from /metrics: %+v", p)
	}
	var sum int64
	for _, s := range p.Bar {
		sum += s.Bytes
	}
	if sum != p.TotalBytes {
		t.Errorf("the bar's segments add up to %d, the pool is %d", sum, p.TotalBytes)
	}
	if p.State != "ok" {
		t.Errorf("pool state %q, want ok", p.State)
	}
	if m.Workloads == nil || m.Workloads.State != "ok" || m.Workloads.Training != 1 || len(m.Workloads.List) != 2 {
		t.Errorf("workloads: %+v", m.Workloads)
	}
	if m.Plans == nil || len(m.Plans.List) != 3 || !m.Plans.TrainingRunning {
		t.Fatalf("plans: %+v", m.Plans)
	}
	for _, pl := range m.Plans.List {
		if pl.State != "wont_fit" {
			t.Errorf("plan %s: %s, want wont_fit (70 GB and more against 40 GB after a flush)", pl.Name, pl.State)
		}
	}
	if m.NVML.State != "up" || len(m.GPUs) != 1 || m.GPUs[0].Name != "NVIDIA GB10" || m.GPUs[0].TemperatureCelsius == nil {
		t.Errorf("GPU: %+v %+v", m.NVML, m.GPUs)
	}
	if len(m.Collectors) != 6 || m.GeneratedAt != "2025-11-24T14:00:00Z" {
		t.Errorf("collectors: %+v at %s", m.Collectors, m.GeneratedAt)
	}
}

func TestVerdicts(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(st *collected.State)
		check func(m Model) string // "" when right
	}{
		{"uncapped server beside training", func(st *collected.State) {
			for i, w := range st.Workloads.Workloads {
				if w.PID == 2101 {
					st.Workloads.Workloads[i].Cap = workload.Cap{Ratio: 0.9, Source: workload.CapDefault}
				}
			}
		}, func(m Model) string {
			if m.Workloads.State != "contention" || !strings.Contains(m.Workloads.Text, "vllm (pid 2101, default cap 90 %)") {
				return m.Workloads.Text
			}
			return ""
		}},
		{"free below the reserve, cache to flush", func(st *collected.State) { st.Pool.Snapshot.Free = 2e9 }, func(m Model) string {
			if m.Pool.State != "cache_holds_headroom" || !strings.Contains(m.Pool.OOMLadderStep, "Step 1 of the OOM ladder") {
				return m.Pool.State + ": " + m.Pool.Text
			}
			if m.Pool.Bar[3].Bytes != 0 || m.Pool.Bar[4].Bytes != 2e9 {
				return "bar with free below the reserve"
			}
			return ""
		}},
		{"no NVML", func(st *collected.State) { st.GPU.Loaded = false }, func(m Model) string {
			if m.NVML.State != "down" || !strings.Contains(m.NVML.Text, "no NVIDIA driver") {
				return m.NVML.Text
			}
			return ""
		}},
		// A need beyond int64 (issue: 6.3e20 bytes wrapped to MinInt64 and
		// read "Fits now") is judged as the float the exposition gives.
		{"impossible plan", func(st *collected.State) {
			for i, p := range st.Plans {
				if p.Name == "gemma-2-27b-lora" {
					st.Plans[i].PeakBytes = 6.3e20
				}
			}
		}, func(m Model) string {
			for _, pl := range m.Plans.List {
				if pl.Name == "gemma-2-27b-lora" && (pl.State != "wont_fit" || pl.RequiredBytes <= 0 || !strings.Contains(pl.Text, "Will not fit")) {
					return pl.State + ": " + pl.Text
				}
			}
			return ""
		}},
		{"pool collector failing", func(st *collected.State) {
			for i, r := range st.Runs {
				if r.Name == "pool" {
					st.Runs[i].Success = false
				}
			}
			st.Pool = nil // as a failed run stores it
		}, func(m Model) string {
			if m.Pool != nil {
				return "a pool from a failed collector"
			}
			return ""
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := sparkState(t)
			tc.edit(&st)
			if msg := tc.check(buildModel(BuildInfo{}, st)); msg != "" {
				t.Error(msg)
			}
		})
	}
}

// A wedged driver call, as the gpu collector publishes it (no reading,
// the collector failing, the call's wait): the page and the status report
// name the hung driver in the runbook's words. A call of 6 s is a failing
// read, not a hung driver.
func TestNVMLHung(t *testing.T) {
	for _, tc := range []struct {
		stalled   time.Duration
		state     string
		want      string
		reportToo bool
	}{
		{9*time.Minute + 12*time.Second, "hung", "The GPU driver has not answered for 9 minutes:", true},
		{45 * time.Second, "hung", "The GPU driver has not answered for 45 seconds:", false},
		{3*time.Hour + 5*time.Minute, "hung", "The GPU driver has not answered for 3 hours:", false},
		{6 * time.Second, "failing", "NVML is loaded but its reads fail", false},
	} {
		st := sparkState(t)
		st.GPU = &collected.GPU{Loaded: true, Stalled: tc.stalled, Failing: true}
		for i, r := range st.Runs {
			if r.Name == "gpu" {
				st.Runs[i].Success = false
			}
		}
		m := buildModel(BuildInfo{}, st)
		if m.NVML.State != tc.state || !strings.HasPrefix(m.NVML.Text, tc.want) {
			t.Errorf("stalled %v: nvml %q, %q; want %q, %q...", tc.stalled, m.NVML.State, m.NVML.Text, tc.state, tc.want)
		}
		if !tc.reportToo {
			continue
		}
		var b strings.Builder
		if err := WriteText(&b, m); err != nil {
			t.Fatal(err)
		}
		if got := b.String(); !strings.Contains(got, "GPU      none reported: "+tc.want) || !strings.Contains(got, "failing collectors: gpu") {
			t.Errorf("the status report does not name the hung driver:\n%s", got)
		}
	}
}

// A window of 10 minutes sampled every second holds 600 samples: the chart
// gets at most maxPoints of them, the latest among them, and only the
// window's.
func TestWindowThinned(t *testing.T) {
	cfg := judge.DefaultThermalConfig()
	cfg.Interval = time.Second
	var samples []judge.ThermalSample
	for i := 1200; i >= 0; i-- {
		samples = append(samples, judge.ThermalSample{Time: now.Add(-time.Duration(i) * time.Second), Temperature: float64(i), Power: 100})
	}
	w := window(samples, cfg, now)
	if n := len(w.Samples); n > maxPoints || n < maxPoints/2 {
		t.Errorf("%d points, want at most %d and not far fewer", n, maxPoints)
	}
	if last := w.Samples[len(w.Samples)-1]; last.SecondsAgo != 0 || w.Temperature.Latest != 0 {
		t.Errorf("latest point %+v", last)
	}
	if first := w.Samples[0]; first.SecondsAgo > 600 {
		t.Errorf("a point from before the window: %+v", first)
	}
	if w.SMClock != nil {
		t.Error("an SM clock range without a clock")
	}
}

func TestFormats(t *testing.T) {
	for got, want := range map[string]string{
		gib(17695264768): "16.5 GiB", gib(-2294967296): "-2.1 GiB", percent(0.9): "90 %",
		watts(99.333): "99.3 W", mhz(1833e6): "1833 MHz", duration(45 * time.Second): "45s",
		duration(200 * time.Second): "3m 20s", duration(10 * time.Minute): "10m", duration(65 * time.Minute): "1h 5m",
	} {
		if got != want {
			t.Errorf("%q, want %q", got, want)
		}
	}
}

// fakeCollectors counts refreshes and holds each until released; a
// refresh stamps the state with the clock.
type fakeCollectors struct {
	mu      sync.Mutex
	state   collected.State
	clock   func() time.Time
	calls   atomic.Int32
	release chan struct{}
}

func (f *fakeCollectors) State() collected.State {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.state
}

func (f *fakeCollectors) At() time.Time { return f.State().At }

func (f *fakeCollectors) Refresh() {
	f.calls.Add(1)
	<-f.release
	f.mu.Lock()
	f.state.At = f.clock()
	f.mu.Unlock()
}

// Viewers asking together share one run of the collectors; a state younger
// than MaxAge is shown again, a scrape's included; an older one is
// collected anew.
func TestSourceSharesOneRun(t *testing.T) {
	var clock atomic.Int64
	clock.Store(now.UnixNano())
	at := func() time.Time { return time.Unix(0, clock.Load()) }
	c := &fakeCollectors{state: sparkState(t), clock: at, release: make(chan struct{})}
	c.state.At = time.Time{} // no scrape yet
	src := NewSource(c)
	src.now = at

	const viewers = 8
	var wg sync.WaitGroup
	results := make(chan *Result, viewers)
	for range viewers {
		wg.Go(func() {
			r, err := src.get(context.Background())
			if err != nil {
				t.Error(err)
			}
			results <- r
		})
	}
	// Let every viewer wait on the one run, then release it.
	for c.calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	close(c.release)
	wg.Wait()
	close(results)
	first := <-results
	for r := range results {
		if r != first {
			t.Error("viewers got different models")
		}
	}
	if _, err := src.get(context.Background()); err != nil || c.calls.Load() != 1 {
		t.Errorf("a model younger than MaxAge was collected again: %d runs", c.calls.Load())
	}
	// A scrape half a second later: its state is shown, nothing runs.
	clock.Add(int64(DefaultMaxAge))
	c.mu.Lock()
	c.state.At = at()
	c.state.Pool.Snapshot.Free = 3 << 30
	c.mu.Unlock()
	clock.Add(int64(DefaultMaxAge / 2))
	if r, err := src.get(context.Background()); err != nil || c.calls.Load() != 1 || r.Model.Pool.FreeBytes != 3<<30 {
		t.Errorf("the scrape's state was not shown: %d runs", c.calls.Load())
	}
	clock.Add(int64(DefaultMaxAge))
	if _, err := src.get(context.Background()); err != nil || c.calls.Load() != 2 {
		t.Errorf("a stale state was shown: %d runs", c.calls.Load())
	}
}

func TestHandler(t *testing.T) {
	cfg := judge.DefaultThermalConfig()
	v := judge.ThermalVerdict{State: judge.Throttled, ThermalSlowdown: true, SlowdownFor: time.Minute,
		Stats: &judge.ThermalStats{PowerMean: 99, PowerMax: 100, PowerSpread: 2, TemperatureMean: 90}}
	clock := 1.8e9
	snap := judge.ThermalSnapshot{GPUs: []judge.GPUThermalState{{Index: 0, Verdict: v, Window: []judge.ThermalSample{
		{Time: now.Add(-10 * time.Second), Temperature: 89, Power: 99, SMClock: &clock},
		{Time: now, Temperature: 90, Power: 100, SMClock: &clock},
	}}}}
	st := sparkState(t)
	st.Thermal = &collected.Thermal{Snapshot: snap, Config: cfg}
	// As on a Spark joined to another: the fabric line in the model.
	st.Fabric = fabricReadings(t, "spark-fabric", 10*time.Second, 5.5e9)
	st.Runs = append(st.Runs, collected.Run{Name: "fabric", Success: true, Duration: time.Millisecond})
	c := &fakeCollectors{state: st, clock: func() time.Time { return now }, release: make(chan struct{})}
	close(c.release)
	src := NewSource(c)
	src.now = func() time.Time { return now }
	h := NewHandler(src, "/metrics", true, true)
	mux := http.NewServeMux()
	mux.Handle("/{$}", h.Page())
	mux.Handle(APIPath, h.API())
	mux.Handle(ViewPath, h.View())

	do := func(method, path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
		return rec
	}
	for _, path := range []string{"/", APIPath, ViewPath} {
		for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodDelete} {
			rec := do(method, path)
			if rec.Code != http.StatusMethodNotAllowed || rec.Header().Get("Allow") != "GET, HEAD" {
				t.Errorf("%s %s: %d, Allow %q", method, path, rec.Code, rec.Header().Get("Allow"))
			}
		}
		if rec := do(http.MethodHead, path); rec.Code != http.StatusOK {
			t.Errorf("HEAD %s: %d", path, rec.Code)
		}
	}

	api := do(http.MethodGet, APIPath)
	if ct := api.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("JSON served as %q", ct)
	}
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "status.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	schema, err := jsonschema.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range schema.Validate(api.Body.Bytes()) {
		t.Errorf("schema: %s", e)
	}
	var m Model
	if err := json.Unmarshal(api.Body.Bytes(), &m); err != nil || m.GPUs[0].Thermal.State != "throttled" || len(m.GPUs[0].Thermal.Window.Samples) != 2 {
		t.Errorf("model: %v %+v", err, m.GPUs)
	}
	if m.Fabric == nil || m.Fabric.TrafficBytesPerSecond == nil || m.Fabric.PCIe == nil {
		t.Errorf("fabric: %+v", m.Fabric)
	}

	// The page's script refreshes from the View: the texts of the page as
	// served, rendered by the same code.
	var view View
	if err := json.Unmarshal(do(http.MethodGet, ViewPath).Body.Bytes(), &view); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"pool.headroom_bytes": "16.5 GiB", "gpus.0.thermal.state": m.GPUs[0].Thermal.Text,
		"gpus.0.power_watts": "99.3 W", "gpus.0.clock_events": "sw_power_cap", "collectors.0.success": "ok", "collectors.0.duration_seconds": "1.0 ms"} {
		if view.Text[k] != want {
			t.Errorf("view %s: %q, want %q", k, view.Text[k], want)
		}
	}
	if c := view.Charts["gpu0-power"]; c.Points == "" || len(c.Lines) != 2 || view.Shape == "" || len(view.Bar) != 6 {
		t.Errorf("view: power chart %+v, shape %q, bar %v", c, view.Shape, view.Bar)
	}

	page := do(http.MethodGet, "/")
	body := page.Body.String()
	if ct := page.Header().Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("page served as %q", ct)
	}
	// Complete without JavaScript: the figures and verdicts are in the
	// HTML as served.
	for _, want := range []string{`data-k="pool.headroom_bytes" value="17695264768">16.5 GiB<`, "37.5 GiB", `data-shape="` + view.Shape + `"`, "Throttling:", "NVML reports a thermal slowdown, for 1m now.",
		"Training beside inference capped at 0.5 or less", "llama-3.1-70b-qlora", `href="./metrics"`,
		"Power over the last 10m: 99.0 W to 100.0 W, now 100.0 W", `<polyline class="line" points="`,
		`data-k="fabric.state">2 of 4 functions up, 400 Gb/s negotiated, carrying 2.2 GB/s; PCIe x4 at 32 GT/s<`} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if len(body) > 100_000 {
		t.Errorf("the page is %d bytes", len(body))
	}
	if csp := page.Header().Get("Content-Security-Policy"); !strings.Contains(csp, hash(pageJS)) || !strings.Contains(body, "<script>"+pageJS+"</script>") {
		t.Error("the script is not the one the Content Security Policy allows")
	}
}

// GB10 throttling as real units show it: the flags clear, the thermal
// slowdown counters growing. The evidence says so, and tells the power
// cap's counter (the platform cap) apart from throttling.
func TestEvidenceOfTheCounters(t *testing.T) {
	v := judge.ThermalVerdict{State: judge.Throttled, CounterSlowdown: true, HasCounters: true, SlowdownSeconds: 12, SlowdownShare: 0.25,
		HasPowerCap: true, PowerCapSeconds: 300}
	got := strings.Join(evidence(v, judge.DefaultThermalConfig()), "\n")
	for _, want := range []string{"thermal slowdown counters are growing, 25 % of the time lately (from 5 %), 12s of slowdown", "SW power cap held the clocks for 5m", "not throttling"} {
		if !strings.Contains(got, want) {
			t.Errorf("evidence lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "NVML reports a thermal slowdown") {
		t.Errorf("evidence claims the flags, which are clear:\n%s", got)
	}
}

// BenchmarkRender is what the model costs to render, on the Spark fixture
// with a full default thermal window (120 samples): as the JSON API, as the
// page's View, and as the whole page.
func BenchmarkRender(b *testing.B) {
	st := sparkState(b)
	cfg := judge.DefaultThermalConfig()
	var window []judge.ThermalSample
	for i := range 120 {
		clock := 1.8e9 + float64(i)*1e6
		window = append(window, judge.ThermalSample{Time: now.Add(-time.Duration(119-i) * cfg.Interval),
			Temperature: 80 + float64(i%10), Power: 99 + float64(i%3), SMClock: &clock})
	}
	st.Thermal = &collected.Thermal{Config: cfg, Snapshot: judge.ThermalSnapshot{GPUs: []judge.GPUThermalState{{Index: 0,
		Verdict: judge.ThermalVerdict{State: judge.Normal}, Window: window}}}}
	m := buildModel(BuildInfo{}, st)
	h := NewHandler(nil, "/metrics", true, true)
	b.Run("json", func(b *testing.B) {
		for b.Loop() {
			(&Result{Model: m}).jsonBody()
		}
	})
	b.Run("view", func(b *testing.B) {
		for b.Loop() {
			(&Result{Model: m}).viewJSON()
		}
	})
	b.Run("page", func(b *testing.B) {
		var buf bytes.Buffer
		for b.Loop() {
			buf.Reset()
			if err := h.render(&buf, m, newView(m)); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// The page's script places what the server rendered: it formats no figure
// and draws no scale of its own, so it cannot disagree with the page.
func TestScriptFormatsNothing(t *testing.T) {
	for _, own := range []string{"toFixed", "Math.round", "GiB", " W\"", "MHz", "°C", "1e6", "1073741824"} {
		if strings.Contains(pageJS, own) {
			t.Errorf("page.js formats figures itself (%q): the View carries them", own)
		}
	}
}

func TestNum(t *testing.T) {
	for x, want := range map[float64]string{0: "0", 12.34: "12.3", 12.35: "12.4", 80: "80", -0.04: "0", -2.5: "-2.5", 299.96: "300", 0.05: "0.1"} {
		if got := num(x); got != want {
			t.Errorf("num(%v) = %q, want %q", x, got, want)
		}
	}
}

// Hot at flat power with the clock holding is watching, and says so; the
// same without any clock is the signature alone, named as such.
func TestThermalTextOfTheClock(t *testing.T) {
	cfg := judge.DefaultThermalConfig()
	st := &judge.ThermalStats{PowerMean: 92, PowerMax: 95, PowerSpread: 6, TemperatureMean: 88.5}
	holding := judge.GPUThermalState{Verdict: judge.ThermalVerdict{State: judge.Watching, Signature: true, ClockHolding: true, Busy: true,
		Flat: true, BelowNominal: true, Hot: true, Stats: st,
		Clock: judge.ClockLoss{HasClock: true, Recent: 2.43e9, HasLevel: true, Level: 2.45e9}}}
	th := thermalOf(holding, cfg, time.Now())
	if !strings.HasPrefix(th.Text, "Watching: hot, clock holding.") || !strings.Contains(strings.Join(th.Evidence, "\n"), "SM clock holds: 2.43 GHz lately, against 2.45 GHz") {
		t.Errorf("clock holding: %q\n%s", th.Text, strings.Join(th.Evidence, "\n"))
	}
	only := judge.GPUThermalState{Verdict: judge.ThermalVerdict{State: judge.Throttled, Signature: true, SignatureOnly: true, Stats: st}}
	if th := thermalOf(only, cfg, time.Now()); !strings.Contains(th.Text, "signature only; clocks not logged") {
		t.Errorf("no clock: %q", th.Text)
	}
}

// The two meminfo states a vLLM Spark's owner published
// (testdata/proc/serving-*/README.md): at the healthy serving idle the pool
// is calm, only noting that a new job needs a flush; at the kill it is
// alarmed. Usable memory is MemAvailable − CmaFree to the byte, and the page
// and `status` lead with it.
func TestPoolOnServingFixtures(t *testing.T) {
	for _, tc := range []struct {
		tree                   string
		available, cmaFree     int64 // kB, from the fixture
		state, tier, text, not string
	}{
		{"serving-idle", 27525120, 136315, "cache_holds_headroom", "ok",
			"Usable memory 26.1 GiB (MemAvailable less free CMA): no danger. A new job needs a flush first", "minutes away"},
		{"serving-kill", 10957619, 9237955, "usable_critical", "critical",
			"Usable memory 1.6 GiB (MemAvailable less free CMA), below 8.0 GiB: a global OOM kill or a wedge is minutes away.", "no danger"},
	} {
		snap, err := pool.Read(filepath.Join("..", "..", "testdata", "proc", tc.tree))
		if err != nil {
			t.Fatal(err)
		}
		st := collected.State{At: now, Pool: &collected.Pool{Snapshot: snap, Reserve: 4 << 30},
			Runs: []collected.Run{{Name: "pool", Success: true, Duration: time.Millisecond}}}
		m := buildModel(BuildInfo{}, st)
		p := m.Pool
		if p.UsableBytes != (tc.available-tc.cmaFree)*1024 || p.CMAFreeBytes == nil || *p.CMAFreeBytes != tc.cmaFree*1024 {
			t.Errorf("%s: usable %d, CMA free %v; want %d = MemAvailable − CmaFree", tc.tree, p.UsableBytes, p.CMAFreeBytes, (tc.available-tc.cmaFree)*1024)
		}
		if p.State != tc.state || p.UsableTier != tc.tier || !strings.HasPrefix(p.Text, tc.text) || strings.Contains(p.Text, tc.not) {
			t.Errorf("%s: state %s, tier %s, text %q; want %s, %s, %q…", tc.tree, p.State, p.UsableTier, p.Text, tc.state, tc.tier, tc.text)
		}
		var sum int64
		for _, s := range p.Bar {
			sum += s.Bytes
		}
		if sum != p.TotalBytes || p.Bar[5].Part != "cma" || p.Bar[5].Bytes != tc.cmaFree*1024 {
			t.Errorf("%s: bar %+v adds up to %d of %d", tc.tree, p.Bar, sum, p.TotalBytes)
		}
		v := newView(m)
		if v.State["pool.usable_tier"] != tc.tier || v.Value["pool.usable_bytes"] != strconv.FormatInt(p.UsableBytes, 10) {
			t.Errorf("%s: view tier %q, usable %q", tc.tree, v.State["pool.usable_tier"], v.Value["pool.usable_bytes"])
		}
		var out strings.Builder
		if err := WriteText(&out, m); err != nil {
			t.Fatal(err)
		}
		if want := "Pool     " + tc.text; !strings.Contains(out.String(), want) || !strings.Contains(out.String(), "danger:  usable "+gib(p.UsableBytes)+" ("+tc.tier+")") {
			t.Errorf("%s: status report\n%s\nlacks %q and the usable line", tc.tree, out.String(), want)
		}
	}
}
