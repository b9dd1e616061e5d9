package status

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/spark-exporter/spark_exporter/internal/judge"
	"github.com/spark-exporter/spark_exporter/internal/testing/jsonschema"
	"github.com/spark-exporter/spark_exporter/internal/thermal"
)

var now = time.Date(2025, 11, 24, 14, 0, 0, 0, time.UTC)

// families parses an exposition; edit replaces whole lines first.
func families(t *testing.T, text string, edits ...string) []*dto.MetricFamily {
	t.Helper()
	for i := 0; i+1 < len(edits); i += 2 {
		if !strings.Contains(text, edits[i]) {
			t.Fatalf("no %q to replace", edits[i])
		}
		text = strings.ReplaceAll(text, edits[i], edits[i+1])
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	var out []*dto.MetricFamily
	for _, f := range fams {
		out = append(out, f)
	}
	return out
}

// sparkMetrics is the exporter's /metrics on the Spark fixture, the golden
// file the end-to-end test keeps.
func sparkMetrics(t *testing.T) string {
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "golden", "spark.metrics"))
	if err != nil {
		t.Fatal(err)
	}
	// The golden file writes the build's labels as <build>, durations as
	// <duration>.
	text := strings.Replace(string(data), "{<build>}", `{goversion="go1.26.0",revision="abc",version="1.0.0"}`, 1)
	return strings.ReplaceAll(text, "<duration>", "0.001")
}

func TestBuildFromSparkMetrics(t *testing.T) {
	text := sparkMetrics(t)
	m := Build(families(t, text), nil, now)
	p := m.Pool
	if p == nil {
		t.Fatal("no pool")
	}
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
	// One entry per collector the golden scrape reports on.
	if want := strings.Count(text, "spark_scrape_collector_success{"); len(m.Collectors) != want || want == 0 {
		t.Errorf("collectors: %+v, want %d", m.Collectors, want)
	}
}

func TestVerdicts(t *testing.T) {
	spark := sparkMetrics(t)
	for _, tc := range []struct {
		name  string
		edits []string
		check func(m Model) string // "" when right
	}{
		{"uncapped server beside training", []string{
			`spark_workload_memory_cap_ratio{kind="vllm",pid="2101",source="flag"} 0.4`, `spark_workload_memory_cap_ratio{kind="vllm",pid="2101",source="default"} 0.9`}, func(m Model) string {
			if m.Workloads.State != "contention" || !strings.Contains(m.Workloads.Text, "vllm (pid 2101, default cap 90 %)") {
				return m.Workloads.Text
			}
			return ""
		}},
		{"free below the reserve, cache to flush", []string{
			"spark_pool_free_bytes 2.1990232064e+10", "spark_pool_free_bytes 2e+09",
			"spark_pool_headroom_bytes 1.7695264768e+10", "spark_pool_headroom_bytes -2.294967296e+09"}, func(m Model) string {
			if m.Pool.State != "cache_holds_headroom" || !strings.Contains(m.Pool.OOMLadderStep, "Step 1 of the OOM ladder") {
				return m.Pool.State + ": " + m.Pool.Text
			}
			if m.Pool.Bar[3].Bytes != 0 || m.Pool.Bar[4].Bytes != 2e9 {
				return "bar with free below the reserve"
			}
			return ""
		}},
		{"no NVML", []string{"spark_gpu_nvml_up 1", "spark_gpu_nvml_up 0"}, func(m Model) string {
			if m.NVML.State != "down" || !strings.Contains(m.NVML.Text, "no NVIDIA driver") {
				return m.NVML.Text
			}
			return ""
		}},
		// A need beyond int64 (issue: 6.3e20 bytes wrapped to MinInt64 and
		// read "Fits now") is judged as the float the exposition gives.
		{"impossible plan", []string{
			`spark_plan_required_bytes{plan="gemma-2-27b-lora"} 1.08e+11`, `spark_plan_required_bytes{plan="gemma-2-27b-lora"} 6.3e+20`}, func(m Model) string {
			for _, pl := range m.Plans.List {
				if pl.Name == "gemma-2-27b-lora" && (pl.State != "wont_fit" || pl.RequiredBytes <= 0 || !strings.Contains(pl.Text, "Will not fit")) {
					return pl.State + ": " + pl.Text
				}
			}
			return ""
		}},
		{"pool collector failing", []string{`spark_scrape_collector_success{collector="pool"} 1`, `spark_scrape_collector_success{collector="pool"} 0`}, func(m Model) string {
			if m.Pool != nil {
				return "a pool from a failed collector"
			}
			return ""
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if msg := tc.check(Build(families(t, spark, tc.edits...), nil, now)); msg != "" {
				t.Error(msg)
			}
		})
	}
}

// A window of 10 minutes sampled every second holds 600 samples: the chart
// gets at most MaxPoints of them, the latest among them, and only the
// window's.
func TestWindowThinned(t *testing.T) {
	cfg := judge.DefaultThermalConfig()
	cfg.Interval = time.Second
	var samples []judge.ThermalSample
	for i := 1200; i >= 0; i-- {
		samples = append(samples, judge.ThermalSample{Time: now.Add(-time.Duration(i) * time.Second), Temperature: float64(i), Power: 100})
	}
	w := window(samples, cfg, now)
	if n := len(w.Samples); n > MaxPoints || n < MaxPoints/2 {
		t.Errorf("%d points, want at most %d and not far fewer", n, MaxPoints)
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
		Bytes(17695264768): "16.5 GiB", Bytes(-2294967296): "-2.1 GiB", Percent(0.9): "90 %",
		Watts(99.333): "99.3 W", MHz(1833e6): "1833 MHz", Duration(45 * time.Second): "45s",
		Duration(200 * time.Second): "3m 20s", Duration(10 * time.Minute): "10m", Duration(65 * time.Minute): "1h 5m",
	} {
		if got != want {
			t.Errorf("%q, want %q", got, want)
		}
	}
}

// gatherer counts gathers and holds each until released.
type gatherer struct {
	fams    []*dto.MetricFamily
	calls   atomic.Int32
	release chan struct{}
}

func (g *gatherer) Gather() ([]*dto.MetricFamily, error) {
	g.calls.Add(1)
	<-g.release
	return g.fams, nil
}

// Viewers asking together share one gather; a model younger than MaxAge
// is served again; an older one is gathered anew.
func TestSourceSharesOneGather(t *testing.T) {
	g := &gatherer{fams: families(t, sparkMetrics(t)), release: make(chan struct{})}
	src := NewSource(g, nil)
	var clock atomic.Int64
	clock.Store(now.UnixNano())
	src.now = func() time.Time { return time.Unix(0, clock.Load()) }

	const viewers = 8
	var wg sync.WaitGroup
	results := make(chan *Result, viewers)
	for range viewers {
		wg.Go(func() {
			r, err := src.Get(context.Background())
			if err != nil {
				t.Error(err)
			}
			results <- r
		})
	}
	// Let every viewer wait on the one gather, then release it.
	for g.calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	close(g.release)
	wg.Wait()
	close(results)
	first := <-results
	for r := range results {
		if r != first {
			t.Error("viewers got different models")
		}
	}
	if _, err := src.Get(context.Background()); err != nil || g.calls.Load() != 1 {
		t.Errorf("a model younger than MaxAge was gathered again: %d gathers", g.calls.Load())
	}
	clock.Add(int64(DefaultMaxAge))
	if _, err := src.Get(context.Background()); err != nil || g.calls.Load() != 2 {
		t.Errorf("a stale model was served: %d gathers", g.calls.Load())
	}
}

func TestHandler(t *testing.T) {
	g := &gatherer{fams: families(t, sparkMetrics(t)), release: make(chan struct{})}
	close(g.release)
	cfg := judge.DefaultThermalConfig()
	v := judge.ThermalVerdict{State: judge.Throttled, ThermalSlowdown: true, SlowdownFor: time.Minute,
		Stats: &judge.ThermalStats{PowerMean: 99, PowerMax: 100, PowerSpread: 2, TemperatureMean: 90}}
	clock := 1.8e9
	snap := thermal.Snapshot{GPUs: []thermal.GPUState{{Index: 0, Verdict: v, Window: []judge.ThermalSample{
		{Time: now.Add(-10 * time.Second), Temperature: 89, Power: 99, SMClock: &clock},
		{Time: now, Temperature: 90, Power: 100, SMClock: &clock},
	}}}}
	src := NewSource(g, func() (ThermalInput, bool) { return ThermalInput{snap, cfg}, true })
	src.now = func() time.Time { return now }
	h := NewHandler(src, "/metrics", true)
	mux := http.NewServeMux()
	mux.Handle("/{$}", h.Page())
	mux.Handle(APIPath, h.API())

	do := func(method, path string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
		return rec
	}
	for _, path := range []string{"/", APIPath} {
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

	page := do(http.MethodGet, "/")
	body := page.Body.String()
	if ct := page.Header().Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("page served as %q", ct)
	}
	// Complete without JavaScript: the figures and verdicts are in the
	// HTML as served.
	for _, want := range []string{"16.5 GiB", "37.5 GiB", "Throttling:", "NVML reports a thermal slowdown, for 1m now.",
		"Training beside inference capped at 0.5 or less", "llama-3.1-70b-qlora", `href="./metrics"`,
		"Power over the last 10m: 99.0 W to 100.0 W, now 100.0 W", `<polyline class="line" points="`} {
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
	v := judge.ThermalVerdict{State: judge.Throttled, CounterSlowdown: true, HasCounters: true, SlowdownSeconds: 12,
		HasPowerCap: true, PowerCapSeconds: 300}
	got := strings.Join(evidence(v, judge.DefaultThermalConfig()), "\n")
	for _, want := range []string{"thermal slowdown counters are growing (12s of slowdown", "SW power cap held the clocks for 5m", "not throttling"} {
		if !strings.Contains(got, want) {
			t.Errorf("evidence lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "NVML reports a thermal slowdown") {
		t.Errorf("evidence claims the flags, which are clear:\n%s", got)
	}
}
