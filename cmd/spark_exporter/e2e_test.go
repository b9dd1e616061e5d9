package main

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spark-exporter/spark_exporter/internal/testexporter"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

var (
	durationLine  = regexp.MustCompile(`(?m)^(spark_scrape_collector_duration_seconds\{[^}]*\}) .*$`)
	buildInfoLine = regexp.MustCompile(`(?m)^spark_exporter_build_info\{.*\} 1$`)
)

// normalise replaces the values that change from run to run.
func normalise(metrics string) string {
	metrics = durationLine.ReplaceAllString(metrics, "$1 <duration>")
	return buildInfoLine.ReplaceAllString(metrics, "spark_exporter_build_info{<build>} 1")
}

// golden compares got with testdata/golden/NAME, or rewrites it under -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join(testexporter.Root(t), "testdata", "golden", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run `go test ./cmd/spark_exporter -run %s -update` to create it)", err, t.Name())
	}
	if got != string(want) {
		t.Errorf("/metrics differs from %s; diff:\n%s\n(if the change is intended: go test ./cmd/spark_exporter -run %s -update)",
			path, diff(string(want), got), t.Name())
	}
}

// diff lists the lines only in want (-) and only in got (+).
func diff(want, got string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	w, g := in(want), in(got)
	var out []string
	for _, l := range strings.Split(want, "\n") {
		if !g[l] {
			out = append(out, "- "+l)
		}
	}
	for _, l := range strings.Split(got, "\n") {
		if !w[l] {
			out = append(out, "+ "+l)
		}
	}
	return strings.Join(out, "\n")
}

func fixtureDir(t *testing.T, name string) string {
	return filepath.Join(testexporter.Root(t), "testdata", "proc", name)
}

// noGPU is a --gpu.nvml-library that does not exist: the exporter as on a
// host without an NVIDIA driver, whatever the test machine has.
const noGPU = "--gpu.nvml-library=/nonexistent/libnvidia-ml.so.1"

// A Spark mid-run: the fixture /proc and the GB10 stand-in NVML playing the
// throttling fine-tune, frozen 45 minutes in.
func TestGoldenSpark(t *testing.T) {
	p := testexporter.Start(t, []string{
		"SPARK_NVML_SCENARIO=" + testexporter.Scenario(t, "gb10-throttle"),
		"SPARK_NVML_FREEZE=45m",
	},
		"--path.procfs="+fixtureDir(t, "spark"),
		"--gpu.nvml-library="+testexporter.StandInNVML(t),
		"--web.disable-exporter-metrics")
	metrics := p.Get(t, "/metrics")
	golden(t, "spark.metrics", normalise(metrics))

	promtool := testexporter.Tool(t, "promtool")
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(metrics)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

// An old kernel on a host without a GPU.
func TestGoldenOldKernel(t *testing.T) {
	p := testexporter.Start(t, nil,
		"--path.procfs="+fixtureDir(t, "oldkernel"),
		noGPU,
		"--web.disable-exporter-metrics")
	golden(t, "oldkernel.metrics", normalise(p.Get(t, "/metrics")))
}

// A /proc source that disappears fails its collector alone, and the
// collector recovers when the source comes back.
func TestLostSourceFailsOnlyItsCollector(t *testing.T) {
	procfs := t.TempDir()
	if err := os.CopyFS(procfs, os.DirFS(fixtureDir(t, "spark"))); err != nil {
		t.Fatal(err)
	}
	p := testexporter.Start(t, nil, "--path.procfs="+procfs)

	success := regexp.MustCompile(`(?m)^spark_scrape_collector_success\{collector="(\w+)"\} (\d)$`)
	states := func() map[string]string {
		m := map[string]string{}
		for _, s := range success.FindAllStringSubmatch(p.Get(t, "/metrics"), -1) {
			m[s[1]] = s[2]
		}
		return m
	}
	before := states()
	if before["pool"] != "1" {
		t.Fatalf("pool not succeeding on the fixture: %v", before)
	}

	meminfo := filepath.Join(procfs, "meminfo")
	data, err := os.ReadFile(meminfo)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(meminfo)
	during := states()
	if during["pool"] != "0" {
		t.Errorf("pool success = %s with meminfo gone, want 0", during["pool"])
	}
	for c, v := range during {
		if c != "pool" && v != before[c] {
			t.Errorf("collector %s changed from %s to %s when only meminfo went", c, before[c], v)
		}
	}
	if err := os.WriteFile(meminfo, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if after := states(); after["pool"] != "1" {
		t.Errorf("pool did not recover: %v", after)
	}
	logs := p.Logs()
	if !strings.Contains(logs, "collector failed") || !strings.Contains(logs, "collector recovered") {
		t.Errorf("failure and recovery not logged:\n%s", logs)
	}
}
