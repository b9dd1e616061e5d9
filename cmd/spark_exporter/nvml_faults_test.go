package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
)

// startOnScenario runs startSpark on the scenario file, sampling
// temperatures ten times a second.
func startOnScenario(t *testing.T, scenario string, args ...string) *testexporter.Process {
	t.Helper()
	return testexporter.StartSpark(t, []string{"SPARK_NVML_SCENARIO=" + scenario}, append(fastThermal, args...)...)
}

// A device that answers its identity and nothing else: every field is
// reported unsupported, no value is made up, and neither the gpu nor the
// thermal collector fails.
func TestGPUSupportingNothing(t *testing.T) {
	p := startOnScenario(t, scenarioWith(t, "unsupported temperature power energy sm_clock utilization clocks_event_reasons processes clocks_event_counters temperature_margin performance_state"))
	m := poll(t, p, "the GPU identified", func(m string) bool {
		v, _ := testexporter.Value(m, "spark_gpu_nvml_up")
		return v == 1 && strings.Contains(m, `spark_gpu_info{`)
	})
	for _, field := range []string{"memory_info", "power_limit", "energy", "temperature", "power", "sm_clock", "utilization", "clocks_event_reasons", "processes", "clocks_event_counters", "temperature_margin", "performance_state"} {
		if v, ok := testexporter.Value(m, `spark_gpu_field_supported{field="`+field+`",gpu="0"}`); !ok || v != 0 {
			t.Errorf("field %s supported = %v (present %v), want 0", field, v, ok)
		}
	}
	for _, line := range strings.Split(m, "\n") {
		if strings.HasPrefix(line, "spark_gpu_") && !strings.HasPrefix(line, "spark_gpu_info{") &&
			!strings.HasPrefix(line, "spark_gpu_field_supported{") && !strings.HasPrefix(line, "spark_gpu_nvml_up ") &&
			!strings.HasPrefix(line, "spark_gpu_nvml_stalled_seconds ") {
			t.Errorf("a value for a device that supports nothing: %s", line)
		}
		if strings.HasPrefix(line, "spark_thermal_") && !strings.HasPrefix(line, "spark_thermal_csv") {
			t.Errorf("a thermal series without temperature or power: %s", line)
		}
	}
	for _, c := range []string{"gpu", "thermal", "pool"} {
		if v, _ := testexporter.Value(m, `spark_scrape_collector_success{collector="`+c+`"}`); v != 1 {
			t.Errorf("collector %s failed on a device that supports nothing", c)
		}
	}
}

// A GPU that falls off the bus mid-run (NVML_ERROR_GPU_IS_LOST): the gpu
// collector fails, naming the device, while NVML stays up and the other
// collectors answer; no reading of the lost GPU is exported; the thermal
// sampler logs its missing readings once. Should the device answer again,
// readings resume without a restart.
func TestGPULostMidRun(t *testing.T) {
	lost := filepath.Join(t.TempDir(), "lost")
	p := startOnScenario(t, scenarioWith(t, "lost file "+lost))
	poll(t, p, "a temperature before the loss", func(m string) bool {
		_, ok := testexporter.Value(m, `spark_gpu_temperature_celsius{gpu="0"}`)
		return ok
	})

	if err := os.WriteFile(lost, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	m := poll(t, p, "the gpu collector failing", func(m string) bool {
		v, _ := testexporter.Value(m, `spark_scrape_collector_success{collector="gpu"}`)
		return v == 0
	})
	if v, _ := testexporter.Value(m, "spark_gpu_nvml_up"); v != 1 {
		t.Error("a lost GPU is not NVML down: nvml_up should stay 1")
	}
	if _, ok := testexporter.Value(m, `spark_gpu_temperature_celsius{gpu="0"}`); ok {
		t.Error("a temperature reported for a lost GPU")
	}
	for _, c := range []string{"pool", "workloads", "thermal"} {
		if v, _ := testexporter.Value(m, `spark_scrape_collector_success{collector="`+c+`"}`); v != 1 {
			t.Errorf("collector %s failed with the GPU lost", c)
		}
	}
	p.WaitLog(t, "GPU is lost")
	p.WaitLog(t, "no GPU reading; the thermal sampler keeps trying")

	os.Remove(lost)
	poll(t, p, "readings after the GPU answered again", func(m string) bool {
		_, ok := testexporter.Value(m, `spark_gpu_temperature_celsius{gpu="0"}`)
		v, _ := testexporter.Value(m, `spark_scrape_collector_success{collector="gpu"}`)
		return ok && v == 1
	})
	p.Stop(t)
	logs := p.Logs()
	if n := strings.Count(logs, "no GPU reading; the thermal sampler keeps trying"); n != 1 {
		t.Errorf("the thermal sampler logged the loss %d times, want once:\n%s", n, logs)
	}
	if !strings.Contains(logs, "gpu 0") {
		t.Errorf("the failure does not name the device:\n%s", logs)
	}
}

// SIGTERM while the driver is wedged: the exporter still exits, with
// status 0, instead of waiting on a call that never returns.
func TestSIGTERMWhileDriverWedged(t *testing.T) {
	hang := filepath.Join(t.TempDir(), "wedged")
	p := startOnScenario(t, scenarioWith(t, "hang file "+hang), "--gpu.timeout=200ms")
	if err := os.WriteFile(hang, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	poll(t, p, "the gpu collector failing on the hang", func(m string) bool {
		v, _ := testexporter.Value(m, `spark_scrape_collector_success{collector="gpu"}`)
		return v == 0
	})
	exited := make(chan int, 1)
	go func() { exited <- p.Stop(t) }()
	select {
	case code := <-exited:
		if code != 0 {
			t.Errorf("exit %d after SIGTERM, want 0", code)
		}
	case <-time.After(30 * time.Second):
		os.Remove(hang) // let the process go, so that the cleanup ends
		t.Fatal("the exporter did not exit within 30s of SIGTERM while the driver was wedged")
	}
}
