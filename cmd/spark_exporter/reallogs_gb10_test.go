package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
)

// Issue 37: report on the logs GB10 owners have. The harness CSVs are real
// runs (testdata/reallogs/README.md); the soak is a twin of one.

type gb10Report struct {
	Assumed      bool   `json:"gpu_assumed_gb10"`
	FromNVML     bool   `json:"gpu_name_from_nvml"` // on a Spark, in place of Assumed
	VerdictState string `json:"verdict_state"`
	Verdict      string `json:"verdict"`
	Start        time.Time
	Throttle     struct {
		Episodes []struct {
			Start, End time.Time
			Evidence   string
		}
		ThrottledSeconds float64 `json:"throttled_seconds"`
	}
}

func reportJSONOf(t *testing.T, args ...string) gb10Report {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if status := run(append(append([]string{"report"}, args...), "--json"), &stdout, &stderr); status != 0 {
		t.Fatalf("report %v: status %d, %s", args, status, stderr.String())
	}
	var r gb10Report
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// Real GB10 runs whose clock follows power are never throttled, and are
// judged as a GB10 without being told.
func TestReportOnRealGB10Runs(t *testing.T) {
	for _, f := range []string{"gb10-harness-rate-sweep-1h44m.csv", "gb10-harness-power-ramp-28m.csv", "gb10-harness-plateau-25m.csv"} {
		t.Run(f, func(t *testing.T) {
			r := reportJSONOf(t, "../../testdata/reallogs/"+f, "--from=2026-05-01T10:00:00Z")
			if r.VerdictState != "not_throttled" || len(r.Throttle.Episodes) != 0 || !(r.Assumed || r.FromNVML) {
				t.Errorf("state %s, %d episodes, assumed GB10 %v: %s", r.VerdictState, len(r.Throttle.Episodes), r.Assumed, r.Verdict)
			}
			if !r.Start.Equal(time.Date(2026, 5, 1, 10, 0, 10, 0, time.UTC)) {
				t.Errorf("start %v, want --from plus the first elapsed_s (10 s)", r.Start)
			}
		})
	}
}

// A twin of the real 1h44m run whose last 40 minutes soak: the SM clock
// falls 2.45 → 2.05 GHz (16 %) at a flat 86–90 W while the temperature
// creeps 84 → 91 °C, both as a first-order approach (12-minute time
// constant). Throttled from when the clock is 10 % down, for most of the 40
// minutes, with the clock as the evidence.
func TestReportSlowHeatSoak(t *testing.T) {
	path := writeSoakTwin(t)
	r := reportJSONOf(t, path, "--from=2026-05-01T10:00:00Z")
	soakStart := r.Start.Add(time.Duration(soakFrom) * time.Second)
	if r.VerdictState != "throttled" || len(r.Throttle.Episodes) == 0 {
		t.Fatalf("state %s: %s", r.VerdictState, r.Verdict)
	}
	e := r.Throttle.Episodes[0]
	if e.Start.Before(soakStart) || !strings.Contains(e.Evidence, "clock_fall") {
		t.Errorf("the first episode from %v (the soak from %v), evidence %q", e.Start, soakStart, e.Evidence)
	}
	if r.Throttle.ThrottledSeconds < 20*60 {
		t.Errorf("throttled %.0f s of the 40-minute soak; want most of it: %s", r.Throttle.ThrottledSeconds, r.Verdict)
	}
}

// soakFrom is where the twin's soak starts, in elapsed_s: 40 minutes
// before the run's end.
var soakFrom float64

func writeSoakTwin(t *testing.T) string {
	t.Helper()
	in, err := os.ReadFile("../../testdata/reallogs/gb10-harness-rate-sweep-1h44m.csv")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(in)), "\n")
	last, _ := strconv.ParseFloat(strings.Split(lines[len(lines)-1], ",")[0], 64)
	soakFrom = last - 40*60
	soak := func(s float64) float64 { return (1 - math.Exp(-s/720)) / (1 - math.Exp(-2400.0/720)) }
	var out []string
	for _, l := range lines {
		f := strings.Split(l, ",")
		at, err := strconv.ParseFloat(f[0], 64)
		if err != nil || at < soakFrom {
			out = append(out, l)
			continue
		}
		power, _ := strconv.ParseFloat(f[1], 64)
		g := soak(at - soakFrom)
		f[1] = fmt.Sprintf("%.2f", min(90, max(86, power)))
		f[2] = fmt.Sprintf("%.0f", 84+7*g)
		f[3] = fmt.Sprintf("%.0f", 2450-400*g)
		f[4] = "96"
		out = append(out, strings.Join(f, ","))
	}
	path := filepath.Join(t.TempDir(), "soak.csv")
	if err := os.WriteFile(path, []byte(strings.Join(out, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// The guide's three columns, as thermal-sample.sh or --thermal.csv-file
// write them: a 40-minute climb to 94 °C at a flat 88 W is one episode,
// "signature only", with no flag.
func TestReportGuideLogIsAGB10(t *testing.T) {
	var lines []string
	start := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	for i := 0; i <= 80; i++ {
		lines = append(lines, fmt.Sprintf("%s, %.0f, %.2f W", start.Add(time.Duration(i)*30*time.Second).Format("2006/01/02 15:04:05.000"),
			54+float64(i)/2, 88+float64(i%3)-1))
	}
	r := reportJSONOf(t, writeLog(t, "thermal.log", lines), "--timezone=UTC")
	if r.VerdictState != "signature_only" || len(r.Throttle.Episodes) != 1 || !(r.Assumed || r.FromNVML) ||
		r.Throttle.Episodes[0].Evidence != "signature_only" || strings.Contains(r.Verdict, "not throttled") {
		t.Errorf("state %s, %d episodes, assumed %v: %s", r.VerdictState, len(r.Throttle.Episodes), r.Assumed, r.Verdict)
	}
}

// A log that names another GPU without a rating, or whose data is not a
// GB10's, says it cannot tell; never "not throttled".
func TestReportCannotTell(t *testing.T) {
	var lines []string
	start := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	for i := 0; i <= 80; i++ {
		lines = append(lines, fmt.Sprintf("%s, %.0f, %.2f W", start.Add(time.Duration(i)*30*time.Second).Format(time.RFC3339), 60.0, 300+float64(i%3)))
	}
	r := reportJSONOf(t, writeLog(t, "thermal.log", lines))
	if r.VerdictState != "cannot_tell" || r.Assumed || !strings.HasPrefix(r.Verdict, "cannot tell: ") || strings.Contains(r.Verdict, "not throttled") {
		t.Errorf("state %s, assumed %v: %s", r.VerdictState, r.Assumed, r.Verdict)
	}
	r = reportJSONOf(t, writeLog(t, "thermal.log", lines[:20]), "--gpu.name=NVIDIA GB10")
	if r.VerdictState != "cannot_tell" || !strings.Contains(r.Verdict, "never cover a whole 10m00s window") {
		t.Errorf("a 10-minute log: state %s: %s", r.VerdictState, r.Verdict)
	}
}

// The ways people capture: noheader with more than three columns (named
// by --columns, suggested by the refusal), [N/A] and Not Supported
// fields, comment lines, a harness header with elapsed_s.
func TestReportCaptures(t *testing.T) {
	start := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	lines := []string{"# nvidia-smi --query-gpu=timestamp,clocks.sm,temperature.gpu,power.draw,utilization.gpu,memory.used --format=csv,noheader -l 30"}
	for i := 0; i <= 40; i++ {
		mem := "[N/A]"
		if i%2 == 0 {
			mem = "Not Supported"
		}
		lines = append(lines, fmt.Sprintf("%s, 2450 MHz, %d, %.2f W, 97 %%, %s", start.Add(time.Duration(i)*30*time.Second).Format("2006/01/02 15:04:05.000"), 70+i%3, 88.0, mem))
	}
	lines = append(lines, "2026/05/01 10:20:30.000, [N/A], 71, [N/A], [N/A], [N/A]")
	path := writeLog(t, "capture.csv", lines)
	var stdout, stderr bytes.Buffer
	if status := run([]string{"report", path, "--timezone=UTC"}, &stdout, &stderr); status != 2 ||
		!strings.Contains(stderr.String(), "6 fields: name the 6 columns with --columns") {
		t.Errorf("without --columns: status %d, %s", status, stderr.String())
	}
	r := reportJSONOf(t, path, "--timezone=UTC", "--columns=timestamp,clocks.sm,temperature.gpu,power.draw,utilization.gpu,memory.used")
	if r.VerdictState != "not_throttled" || !strings.Contains(r.Verdict, "busy 100 %") {
		t.Errorf("with --columns: %s %s", r.VerdictState, r.Verdict)
	}
	// --columns overrides a header: here one that names them wrongly.
	wrong := writeLog(t, "wrong.csv", append([]string{"timestamp, power.draw [W], temperature.gpu, clocks.sm [MHz], utilization.gpu [%], memory.used [MiB]"}, lines[1:]...))
	if r := reportJSONOf(t, wrong, "--timezone=UTC", "--columns=timestamp,clocks.sm,temperature.gpu,power.draw,utilization.gpu,memory.used"); r.VerdictState != "not_throttled" {
		t.Errorf("--columns over a header: %s %s", r.VerdictState, r.Verdict)
	}
}

// From Prometheus too: a run whose recorded verdicts were all collecting
// (shorter than a window) cannot be told, and says so.
func TestReportPrometheusCannotTell(t *testing.T) {
	const from = 1700000000
	url := fakePrometheus(t, func(q string) [][2]any {
		v := ""
		switch {
		case strings.Contains(q, `state="collecting"`):
			v = "1"
		case strings.Contains(q, `state="throttled"`):
			v = "0"
		case strings.Contains(q, "temperature"):
			v = "70"
		case strings.Contains(q, "power_watts"):
			v = "90"
		default:
			return nil
		}
		var points [][2]any
		for at := from; at <= from+300; at += 15 {
			points = append(points, [2]any{at, v})
		}
		return points
	})
	var stdout, stderr bytes.Buffer
	status := run([]string{"report", "--prometheus.url=" + url, "--instance=spark", fmt.Sprintf("--from=%d", from), fmt.Sprintf("--to=%d", from+300), "--json"}, &stdout, &stderr)
	var r gb10Report
	if err := json.Unmarshal(stdout.Bytes(), &r); status != 0 || err != nil {
		t.Fatalf("status %d, %v: %s", status, err, stderr.String())
	}
	if r.VerdictState != "cannot_tell" || !r.Assumed || strings.Contains(r.Verdict, "not throttled") {
		t.Errorf("state %s, assumed %v: %s", r.VerdictState, r.Assumed, r.Verdict)
	}
}

// On the Spark itself, the exporter's own CSV (no name column) is judged
// as the GB10 this machine's NVML names, not an assumed one: the GB10
// stand-in as the machine's libnvidia-ml.so.1.
func TestReportKnowsThisMachinesGPU(t *testing.T) {
	lib := testexporter.StandInNVML(t)
	dir := t.TempDir()
	if err := os.Symlink(lib, filepath.Join(dir, "libnvidia-ml.so.1")); err != nil {
		t.Fatal(err)
	}
	var lines []string
	start := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	for i := 0; i <= 40; i++ {
		lines = append(lines, fmt.Sprintf("%s, %d, 90.00 W", start.Add(time.Duration(i)*30*time.Second).Format("2006/01/02 15:04:05.000"), 70+i%3))
	}
	cmd := testexporter.Command(t, "report", writeLog(t, "thermal.csv", lines), "--timezone=UTC")
	cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+dir, "SPARK_NVML_SCENARIO="+testexporter.Scenario(t, "gb10-idle"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !strings.Contains(string(out), "NVIDIA GB10 (this machine's, from NVML: the log names none)") || strings.Contains(string(out), "assumed GB10") {
		t.Errorf("the report does not name this machine's GB10:\n%s", out)
	}
}
