package main

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
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

func fixtureDir(t testing.TB, name string) string {
	return filepath.Join(testexporter.Root(t), "testdata", "proc", name)
}

// sysFixture is a fixture /sys tree (spark, spark-nospbm, x86-server), for
// --path.sysfs: output compared with a golden file must not depend on the
// test machine's own /sys.
func sysFixture(t testing.TB, name string) string {
	// Relative to the package's directory, where tests run, and made
	// absolute for the binary: finding the repository root runs `go env`,
	// a child process that scripts/bench-counts.sh's callgrind cannot follow.
	dir, err := filepath.Abs(filepath.Join("..", "..", "testdata", "sys", name))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// kmsgFixture is a --kernel.kmsg-path of testdata/kmsg: output compared
// with a golden file must not depend on the test machine's kernel log.
func kmsgFixture(t testing.TB, name string) string {
	return "--kernel.kmsg-path=" + filepath.Join(testexporter.Root(t), "testdata", "kmsg", name)
}

// noKmsg is a --kernel.kmsg-path that does not exist: the exporter as
// without CAP_SYSLOG.
const noKmsg = "--kernel.kmsg-path=/nonexistent/kmsg"

// noGPU is a --gpu.nvml-library that does not exist: the exporter as on a
// host without an NVIDIA driver, whatever the test machine has.
const noGPU = "--gpu.nvml-library=/nonexistent/libnvidia-ml.so.1"

// A Spark mid-run: the fixture /proc and the GB10 stand-in NVML playing the
// throttling fine-tune, frozen 45 minutes in.
func TestGoldenSpark(t *testing.T) {
	p := testexporter.StartSpark(t, testexporter.FrozenAt(t, "gb10-throttle", "45m"),
		// One thermal sample, the one taken at start: a second would make
		// the thermal series depend on how long the test took.
		"--thermal.interval=1h", "--thermal.window=3h",
		"--plan.file="+filepath.Join(testexporter.Root(t), "testdata", "plans", "spark.yml"),
		kmsgFixture(t, "spark.kmsg"), noJournal,
		// One flight record, the one written at start.
		"--flight.file="+filepath.Join(t.TempDir(), "flight"), "--flight.interval=1h",
		// The fixture's vLLM would be asked at 127.0.0.1:8000, whatever
		// listens there on the test machine, and its answer shows from
		// the second scrape: not a golden file's. The engines collector is
		// tested with fake engines (TestEngines*).
		"--no-collector.engines",
		"--web.disable-exporter-metrics")
	var metrics string
	testexporter.Eventually(t, 30*time.Second, func() bool {
		metrics = p.Get(t, "/metrics")
		return strings.Contains(metrics, "spark_thermal_state{")
	}, "the thermal sampler's first sample")
	golden(t, "spark.metrics", normalise(metrics))

	// The build must be the one meant: make test-arm64 runs this test on the
	// cross-built binary under emulation.
	goarch := os.Getenv("SPARK_TEST_GOARCH")
	if goarch == "" {
		goarch = runtime.GOARCH
	}
	if !strings.Contains(metrics, `goarch="`+goarch+`"`) {
		t.Errorf("build_info does not say goarch=%q:\n%s", goarch, buildInfoLine.FindString(metrics))
	}

	promtool := testexporter.Tool(t, "promtool")
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(metrics)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}

// An old kernel on a host without a GPU.
var (
	throttledSecondsLine = regexp.MustCompile(`(?m)^(spark_thermal_throttled_seconds_total\{[^}]*\}) .*$`)
	windowLine           = regexp.MustCompile(`(?m)^(spark_thermal_window_\w+\{[^}]*\}) (\S+)$`)
)

// roundWindow rounds the window's figures to 6 significant digits: a mean
// of equal samples differs in its last bits with the number of samples,
// which depends on how long the test ran.
func roundWindow(metrics string) string {
	return windowLine.ReplaceAllStringFunc(metrics, func(line string) string {
		m := windowLine.FindStringSubmatch(line)
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			return line
		}
		return m[1] + " " + strconv.FormatFloat(v, 'g', 6, 64)
	})
}

// The thermal collector once its window is full, on the stand-in frozen
// mid-throttle (99 W, 90 °C: flat below the rating, holding hot): every
// sample the same, so the window's figures are exact.
// Only the time spent throttled depends on how long the test ran.
func TestGoldenThermal(t *testing.T) {
	p := testexporter.StartSpark(t, testexporter.FrozenAt(t, "gb10-throttle", "45m"),
		"--thermal.interval=1s", "--thermal.window=3s",
		"--web.disable-exporter-metrics")
	var metrics string
	testexporter.Eventually(t, 60*time.Second, func() bool {
		metrics = p.Get(t, "/metrics?collect[]=thermal")
		// Frozen at 45m: 88 °C at a flat 100 W, the clock standing still
		// and the counters with it: the signature with the clock holding,
		// watching (hot, clock holding), not throttled. The signature
		// needs the whole window.
		return strings.Contains(metrics, `spark_thermal_throttle_signature{gpu="0"} 1`)
	}, "the thermal window to fill and show the signature")
	golden(t, "thermal.metrics", roundWindow(throttledSecondsLine.ReplaceAllString(normalise(metrics), "$1 <seconds>")))
}

func TestGoldenOldKernel(t *testing.T) {
	p := testexporter.Start(t, nil,
		"--path.procfs="+fixtureDir(t, "oldkernel"),
		"--path.sysfs="+sysFixture(t, "x86-server"),
		noGPU, noKmsg, noJournal,
		"--web.disable-exporter-metrics")
	golden(t, "oldkernel.metrics", normalise(p.Get(t, "/metrics")))
}

// The platform collector on each fixture /sys tree: a Spark with the spbm
// driver, a Spark without it, and an x86 server that gets only what its
// files say.
func TestGoldenPlatform(t *testing.T) {
	for _, tree := range []string{"spark", "spark-nospbm", "x86-server"} {
		t.Run(tree, func(t *testing.T) {
			p := testexporter.Start(t, nil,
				"--path.procfs="+fixtureDir(t, "spark"),
				"--path.sysfs="+sysFixture(t, tree),
				noGPU, "--web.disable-exporter-metrics")
			golden(t, "platform-"+tree+".metrics", normalise(p.Get(t, "/metrics?collect[]=platform")))
		})
	}
}

// The fabric collector on a healthy Spark (one cable, two of its four
// functions up), a degraded one (a function down, one trained at PCIe x2)
// and a Spark without RDMA devices.
func TestGoldenFabric(t *testing.T) {
	for _, tree := range []string{"spark-fabric", "spark-fabric-degraded", "spark"} {
		t.Run(tree, func(t *testing.T) {
			p := testexporter.Start(t, nil,
				"--path.procfs="+fixtureDir(t, "spark"),
				"--path.sysfs="+sysFixture(t, tree),
				noGPU, "--web.disable-exporter-metrics")
			golden(t, "fabric-"+tree+".metrics", normalise(p.Get(t, "/metrics?collect[]=fabric")))
		})
	}
}

// The pool collector on the published GB10 ranks (testdata/proc/fragmented
// and fresh: free blocks by order, compaction counters) and on a kernel whose
// CMA accounting lies (cma-anomaly).
func TestGoldenPool(t *testing.T) {
	for _, tree := range []string{"fragmented", "fresh", "cma-anomaly"} {
		t.Run(tree, func(t *testing.T) {
			p := testexporter.Start(t, nil,
				"--path.procfs="+fixtureDir(t, tree),
				noGPU, noKmsg, "--web.disable-exporter-metrics")
			golden(t, "pool-"+tree+".metrics", normalise(p.Get(t, "/metrics?collect[]=pool")))
		})
	}
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
	p.WaitLog(t, "collector failed")
	p.WaitLog(t, "collector recovered")
}

// Go code runs on one CPU unless told otherwise, as node_exporter's does.
func TestGOMAXPROCS(t *testing.T) {
	for args, want := range map[string]string{"": "1", "--runtime.gomaxprocs=2": "2"} {
		argv := []string{"--path.procfs=" + fixtureDir(t, "spark"), noGPU}
		if args != "" {
			argv = append(argv, args)
		}
		// Whatever GOMAXPROCS the tests run with.
		metrics := testexporter.Start(t, []string{"GOMAXPROCS="}, argv...).Get(t, "/metrics")
		if !strings.Contains(metrics, "\ngo_sched_gomaxprocs_threads "+want+"\n") {
			t.Errorf("%q: want go_sched_gomaxprocs_threads %s in:\n%s", args, want, metrics)
		}
	}
}
