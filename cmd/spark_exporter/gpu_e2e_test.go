package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
)

// These tests run the built exporter on the GB10 stand-in NVML library
// (internal/testing/standin), driven by scenarios in testdata/nvml/scenarios.

// gpuOnly scrapes the gpu collector alone, so that these goldens do not
// change when other collectors do.
const gpuOnly = "/metrics?collect[]=gpu"

// The stand-in as other NVIDIA hosts and drivers answer: two discrete GPUs
// with memory info and power limits; a GB10 whose patched driver answers
// memory info. What NVML says is exported, and nothing it does not.
func TestGoldenGPUScenarios(t *testing.T) {
	for _, name := range []string{"multi-gpu", "gb10-patched-meminfo"} {
		t.Run(name, func(t *testing.T) {
			p := testexporter.StartSpark(t, testexporter.FrozenAt(t, name, "5m"), "--web.disable-exporter-metrics")
			golden(t, "gpu-"+name+".metrics", normalise(p.Get(t, gpuOnly)))
		})
	}
}

// boundedGet fetches path with a client timeout, so that a scrape that
// hangs fails the test instead of hanging it.
func boundedGet(t *testing.T, p *testexporter.Process, path string) string {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(p.URL + path)
	if err != nil {
		t.Fatalf("scrape did not complete: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %v %v\n%s", path, resp.Status, err, body)
	}
	return string(body)
}

// poll scrapes until cond holds or a bounded deadline passes.
func poll(t *testing.T, p *testexporter.Process, what string, cond func(metrics string) bool) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		m := boundedGet(t, p, "/metrics")
		if cond(m) {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30s; last scrape:\n%s", what, m)
		}
		time.Sleep(50 * time.Millisecond) // polling interval, not synchronisation
	}
}

// scenarioWith writes a scenario: an idle GB10 plus extra directives.
func scenarioWith(t *testing.T, extra string) string {
	t.Helper()
	base, err := os.ReadFile(testexporter.Scenario(t, "gb10-idle"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "test.scenario")
	if err := os.WriteFile(path, []byte(extra+"\n"+string(base)), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// A wedged driver: scrapes keep answering, the gpu collector fails alone,
// repeated scrapes do not pile up goroutines, and readings resume when the
// driver answers again. --gpu.max-age=0: every scrape reads NVML, so the
// hang shows at the first scrape rather than once the latest reading is
// older than the bound.
func TestGPUHangKeepsScrapesAnswering(t *testing.T) {
	hang := filepath.Join(t.TempDir(), "wedged")
	p := testexporter.StartSpark(t, []string{"SPARK_NVML_SCENARIO=" + scenarioWith(t, "hang file "+hang)},
		"--gpu.timeout=200ms", "--gpu.max-age=0")
	m := boundedGet(t, p, "/metrics")
	if v, _ := testexporter.Value(m, `spark_scrape_collector_success{collector="gpu"}`); v != 1 {
		t.Fatalf("gpu collector not succeeding before the hang:\n%s", m)
	}

	if err := os.WriteFile(hang, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var goroutines []float64
	for range 10 {
		m = boundedGet(t, p, "/metrics")
		if v, ok := testexporter.Value(m, `spark_scrape_collector_success{collector="gpu"}`); !ok || v != 0 {
			t.Fatalf("gpu success = %v (present %v) during the hang, want 0", v, ok)
		}
		if v, _ := testexporter.Value(m, `spark_scrape_collector_success{collector="pool"}`); v != 1 {
			t.Fatal("the pool collector did not answer during the hang")
		}
		if v, _ := testexporter.Value(m, "spark_gpu_nvml_up"); v != 1 {
			t.Error("a hang is not NVML being absent: nvml_up should stay 1")
		}
		if _, ok := testexporter.Value(m, `spark_gpu_temperature_celsius{gpu="0"}`); ok {
			t.Error("a temperature reported while the driver is wedged")
		}
		g, _ := testexporter.Value(m, "go_goroutines")
		goroutines = append(goroutines, g)
	}
	// A call left behind per scrape would add one goroutine per scrape:
	// the least of the last three counts would stand well above the most
	// of scrapes 4-6. HTTP connections and the thermal sampler come and go
	// by a few, hence the least and the most; the first scrapes of the hang
	// may start the workers that then stay, hence not from the first.
	if early, late := slices.Max(goroutines[3:6]), slices.Min(goroutines[len(goroutines)-3:]); late >= early+4 {
		t.Errorf("goroutines grew over scrapes during the hang: %v", goroutines)
	}

	os.Remove(hang)
	poll(t, p, "readings after the hang", func(m string) bool {
		_, ok := testexporter.Value(m, `spark_gpu_temperature_celsius{gpu="0"}`)
		v, _ := testexporter.Value(m, `spark_scrape_collector_success{collector="gpu"}`)
		return ok && v == 1
	})
	if logs := p.Logs(); !strings.Contains(logs, "--gpu.timeout=200ms") {
		t.Errorf("the failure log does not name the deadline:\n%s", logs)
	}
}

// A wedged driver, as SparkGPUDriverHung sees it: while the call hangs,
// spark_gpu_nvml_stalled_seconds grows from scrape to scrape, each scrape
// answering within its bound with the other collectors' series; once the
// driver answers it is 0 again. --gpu.max-age=0: the first scrape after the
// hang starts waits on it.
func TestGPUStallGrowsWhileWedged(t *testing.T) {
	hang := filepath.Join(t.TempDir(), "wedged")
	p := testexporter.StartSpark(t, []string{"SPARK_NVML_SCENARIO=" + scenarioWith(t, "hang file "+hang)},
		"--gpu.timeout=200ms", "--gpu.max-age=0")
	stalled := func(m string) float64 {
		t.Helper()
		v, ok := testexporter.Value(m, "spark_gpu_nvml_stalled_seconds")
		if !ok {
			t.Fatalf("no spark_gpu_nvml_stalled_seconds:\n%s", m)
		}
		return v
	}
	if v := stalled(boundedGet(t, p, "/metrics")); v != 0 {
		t.Fatalf("stalled %v s before the hang, want 0", v)
	}

	if err := os.WriteFile(hang, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	first := stalled(poll(t, p, "a stall of a second", func(m string) bool { return stalled(m) >= 1 }))
	m := poll(t, p, "the stall to grow", func(m string) bool { return stalled(m) > first })
	for series, want := range map[string]float64{
		`spark_scrape_collector_success{collector="gpu"}`:  0,
		`spark_scrape_collector_success{collector="pool"}`: 1,
		"spark_gpu_nvml_up": 1,
	} {
		if v, ok := testexporter.Value(m, series); !ok || v != want {
			t.Errorf("%s = %v (present %v) during the hang, want %v", series, v, ok, want)
		}
	}

	os.Remove(hang)
	poll(t, p, "no stall once the driver answers", func(m string) bool {
		v, _ := testexporter.Value(m, `spark_scrape_collector_success{collector="gpu"}`)
		return stalled(m) == 0 && v == 1
	})
}

// No driver at start, then a driver: spark_gpu_nvml_up goes from 0 to 1
// without a restart, and the scrape succeeds throughout.
func TestGPUInitRecoversWithoutRestart(t *testing.T) {
	noDriver := filepath.Join(t.TempDir(), "no-driver")
	if err := os.WriteFile(noDriver, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	p := testexporter.StartSpark(t, []string{"SPARK_NVML_SCENARIO=" + scenarioWith(t, "init_fail file "+noDriver)})
	m := boundedGet(t, p, "/metrics")
	if v, ok := testexporter.Value(m, "spark_gpu_nvml_up"); !ok || v != 0 {
		t.Fatalf("nvml_up = %v (present %v) without a driver, want 0", v, ok)
	}
	if v, _ := testexporter.Value(m, `spark_scrape_collector_success{collector="gpu"}`); v != 1 {
		t.Error("no driver failed the gpu collector; it is a normal state")
	}
	if n := strings.Count(p.Logs(), "NVML unavailable"); n != 1 {
		t.Errorf("unavailability logged %d times, want once:\n%s", n, p.Logs())
	}

	os.Remove(noDriver)
	poll(t, p, "nvml_up 1 after the driver loaded", func(m string) bool {
		v, _ := testexporter.Value(m, "spark_gpu_nvml_up")
		_, info := testexporter.Value(m, `spark_gpu_info{compute_capability="12.1",cuda_driver_version="13.0",driver_version="580.126.09",gpu="0",name="NVIDIA GB10",uuid="GPU-5b0e7c3a-1f4d-4e2a-9c61-0b1000000000"}`)
		return v == 1 && info
	})
	if !strings.Contains(p.Logs(), "NVML initialised") {
		t.Errorf("recovery not logged:\n%s", p.Logs())
	}
}

// The shipped init-fails scenario: never up, one log line, no path in it.
func TestGPUInitFails(t *testing.T) {
	p := testexporter.StartSpark(t, []string{"SPARK_NVML_SCENARIO=" + testexporter.Scenario(t, "init-fails")})
	m := boundedGet(t, p, gpuOnly)
	if v, ok := testexporter.Value(m, "spark_gpu_nvml_up"); !ok || v != 0 {
		t.Errorf("nvml_up = %v (present %v), want 0", v, ok)
	}
	logs := p.Logs()
	if !strings.Contains(logs, "Driver Not Loaded") {
		t.Errorf("the log does not say why NVML is unavailable:\n%s", logs)
	}
	if strings.Contains(logs, testexporter.StandInNVML(t)) || strings.Contains(logs, "scenario") {
		t.Errorf("the log names a path or the environment:\n%s", logs)
	}
}
