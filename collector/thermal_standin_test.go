package collector

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/go-kit/log"

	"github.com/spark-exporter/spark_exporter/internal/gpu"
	"github.com/spark-exporter/spark_exporter/internal/gpu/thermalsampler"
	"github.com/spark-exporter/spark_exporter/internal/judge"
	"github.com/spark-exporter/spark_exporter/internal/report"
	"github.com/spark-exporter/spark_exporter/internal/testing/standin"
	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
	"github.com/spark-exporter/spark_exporter/internal/thermallog"
)

// The guide's heat soak after serving, read live from the GB10 stand-in
// through go-nvml every 10 s of scenario time: throttled from within two
// minutes of the moment its header says the clock is 10 % down, to the
// end, evidence clock_fall; and from the same sample as `report` on the
// trace logged by nvidia-smi.
func TestThermalHeatSoakOnTheStandIn(t *testing.T) {
	const name = "gb10-heat-soak-after-serving"
	span, interval := 105*time.Minute, 10*time.Second
	scenario := testexporter.Scenario(t, name)
	lib := nvml.New(nvml.WithLibraryPath(testexporter.StandInNVML(t)))
	t.Setenv("SPARK_NVML_SCENARIO", scenario)
	t.Setenv("SPARK_NVML_FREEZE", "0")
	client := gpu.New(gpu.Options{NVML: lib})
	t.Cleanup(func() { client.Close() })
	if !client.Up() {
		t.Fatal("the stand-in did not initialise")
	}
	cfg := judge.DefaultThermalConfig()
	cfg.Interval = interval
	logs := &bytes.Buffer{}
	c := newThermalCollector(thermalsampler.NewSampler(client, cfg, "", log.NewLogfmtLogger(logs)))
	t.Cleanup(func() { c.Close() })

	var onset time.Time
	var evidence string
	seen := map[string]bool{} // evidence over the episode
	for at := time.Duration(0); at <= span; at += interval {
		// The library reads its scenario, and the time it is frozen at,
		// at each nvmlInit.
		t.Setenv("SPARK_NVML_FREEZE", strconv.FormatFloat(at.Seconds(), 'f', -1, 64))
		if ret := lib.Init(); ret != nvml.SUCCESS {
			t.Fatalf("nvmlInit: %v", ret)
		}
		lib.Shutdown()
		c.sampler.Sample(context.Background(), start.Add(at))
		snap, err := c.snapshot()
		if err != nil {
			t.Fatal(err)
		}
		v := snap.GPUs[0].Verdict
		if v.State == judge.Throttled && onset.IsZero() {
			onset, evidence = start.Add(at), v.Evidence()
		}
		if v.State == judge.Throttled {
			for _, part := range strings.Split(v.Evidence(), "+") {
				seen[part] = true
			}
		}
	}
	snap, _ := c.snapshot()
	if onset.IsZero() || snap.GPUs[0].Verdict.State != judge.Throttled || snap.GPUs[0].Episodes != 1 {
		t.Fatalf("throttled from %v, %d episodes, state %s at the end; want one episode to the end", onset, snap.GPUs[0].Episodes, snap.GPUs[0].Verdict.State)
	}
	if !strings.Contains(logs.String(), "clock_fall") {
		t.Errorf("the throttle warning does not name the clock's fall:\n%s", logs)
	}

	soak := start.Add(65 * time.Minute)
	if down := tenPercentDown(t, scenario); onset.Sub(soak) < down-2*time.Minute || onset.Sub(soak) > down+2*time.Minute {
		t.Errorf("throttled from %v into the soak; its clock is 10 %% down from %v", onset.Sub(soak), down)
	}
	e := reportOnScenario(t, scenario, interval, span)
	if !strings.Contains(evidence, "clock_fall") {
		t.Errorf("evidence %q, want the clock's fall", evidence)
	}
	same := true
	parts := strings.Split(e.Evidence, "+")
	for _, part := range parts {
		same = same && seen[part]
	}
	if !e.Start.Equal(onset) || !e.Open || !same || len(parts) != len(seen) {
		t.Errorf("live: throttled from %v into the soak, evidence %v; the report: from %v (open %v), evidence %s",
			onset.Sub(soak), seen, e.Start.Sub(soak), e.Open, e.Evidence)
	}
}

// tenPercentDown is when the scenario's header says its clock is 10 %
// below where it ran at the same power.
func tenPercentDown(t *testing.T, scenario string) time.Duration {
	t.Helper()
	text, err := os.ReadFile(scenario)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`\(([0-9hms]+) into the soak\)`).FindSubmatch(text)
	if m == nil {
		t.Fatalf("%s does not say when its clock is 10 %% down", scenario)
	}
	d, err := time.ParseDuration(string(m[1]))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// reportOnScenario is the report's one episode on the scenario logged by
// nvidia-smi every interval, its first row at start.
func reportOnScenario(t *testing.T, scenario string, interval, span time.Duration) report.Episode {
	t.Helper()
	text, err := os.ReadFile(scenario)
	if err != nil {
		t.Fatal(err)
	}
	csv, err := standin.QueryGPULog(text, start, interval, span)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := thermallog.Parse(bytes.NewReader(csv))
	if err != nil {
		t.Fatal(err)
	}
	r, err := report.FromLog(tr, judge.DefaultThermalConfig(), report.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Throttle.Episodes) != 1 {
		t.Fatalf("the report: %d episodes: %s", len(r.Throttle.Episodes), r.Verdict)
	}
	return r.Throttle.Episodes[0]
}
