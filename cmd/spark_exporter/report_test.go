package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `spark_exporter report LOG`: exit 0 with the report, whatever it says;
// malformed lines are warned about by number; --json and --svg write
// their forms.
func TestReportCommandOnALog(t *testing.T) {
	svg := filepath.Join(t.TempDir(), "run.svg")
	var stdout, stderr bytes.Buffer
	status := run([]string{"report", "../../testdata/report/guide-noheader-malformed.csv", "--gpu.name=NVIDIA GB10", "--json", "--svg", svg}, &stdout, &stderr)
	if status != 0 {
		t.Fatalf("status %d, stderr %s", status, stderr.String())
	}
	var r struct {
		Throttle struct{ Episodes []struct{ Evidence string } }
		Verdict  string
	}
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil || len(r.Throttle.Episodes) != 1 || !strings.Contains(r.Verdict, "thermal, not configuration") {
		t.Errorf("JSON report %s (%v)", stdout.String(), err)
	}
	for _, line := range []string{"line 12:", "line 43:", "line 64:"} {
		if !strings.Contains(stderr.String(), line) {
			t.Errorf("stderr does not name %s: %s", line, stderr.String())
		}
	}
	if data, err := os.ReadFile(svg); err != nil || !bytes.HasPrefix(data, []byte("<svg ")) {
		t.Errorf("--svg wrote %.40q (%v)", data, err)
	}
}

// Bad input exits 2 with a message naming the flag or the line; a
// Prometheus that cannot be reached exits 1.
func TestReportCommandRefusesBadInput(t *testing.T) {
	garbage := filepath.Join(t.TempDir(), "garbage.csv")
	if err := os.WriteFile(garbage, []byte("hello, world\n1, 2, 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	noPower := filepath.Join(t.TempDir(), "nopower.csv")
	if err := os.WriteFile(noPower, []byte("timestamp, temperature.gpu, clocks.sm [MHz], utilization.gpu [%]\n2025/11/24 14:00:00, 50, 2400 MHz, 90 %\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	twoGPUs := filepath.Join(t.TempDir(), "two.csv")
	if err := os.WriteFile(twoGPUs, []byte(twoGPULog), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args   []string
		status int
		names  string
	}{
		{[]string{"report"}, 2, "--prometheus.url"},
		{[]string{"report", garbage}, 2, "line 1: a header naming no column"},
		{[]string{"report", noPower}, 2, "has no power.draw column (it has clocks.sm, temperature.gpu, timestamp, utilization.gpu)"},
		{[]string{"report", twoGPUs, "--gpu=5"}, 2, "the log has no GPU 5 (it has 0, 1)"},
		{[]string{"report", "../../testdata/thermal/idle.csv", "--prometheus.url=http://127.0.0.1:1"}, 2, "not both"},
		{[]string{"report", "--prometheus.url=ftp://x"}, 2, "--prometheus.url"},
		{[]string{"report", "--prometheus.url=http://127.0.0.1:1", "--last=soon"}, 2, "--last"},
		{[]string{"report", "--prometheus.url=http://127.0.0.1:1", "--from=yesterday"}, 2, "--from"},
		{[]string{"report", "--prometheus.url=http://127.0.0.1:1", "--gpu=x"}, 2, "--gpu"},
		{[]string{"report", "--prometheus.url=http://127.0.0.1:1", "--prometheus.basic-auth-password-file=/nonexistent"}, 2, "--prometheus.basic-auth-user"},
		{[]string{"report", "--prometheus.url=http://127.0.0.1:1", "--instance=a", "--last=1m"}, 1, "127.0.0.1:1"},
	} {
		var stdout, stderr bytes.Buffer
		if status := run(tc.args, &stdout, &stderr); status != tc.status || !strings.Contains(stderr.String(), tc.names) {
			t.Errorf("%v: status %d, stderr %q; want %d naming %s", tc.args, status, stderr.String(), tc.status, tc.names)
		}
	}
}

// twoGPULog is a two-GPU nvidia-smi log: GPU 1 is a hot H100 (its name
// and power limit in the log), GPU 0 an idle one.
const twoGPULog = `timestamp, index, name, temperature.gpu, power.draw [W], power.limit [W]
2025/11/24 14:00:00, 0, NVIDIA H100 80GB HBM3, 34, 68.21 W, 700.00 W
2025/11/24 14:00:00, 1, NVIDIA H100 80GB HBM3, 70, 650.00 W, 700.00 W
2025/11/24 14:00:05, 0, NVIDIA H100 80GB HBM3, 34, 68.30 W, 700.00 W
2025/11/24 14:00:05, 1, NVIDIA H100 80GB HBM3, 71, 652.00 W, 700.00 W
`

// Several GPUs by index: the lowest by default, --gpu for another; the
// log's name and power limit are the GPU's, not GB10's.
func TestReportChoosesTheGPU(t *testing.T) {
	log := filepath.Join(t.TempDir(), "two.csv")
	if err := os.WriteFile(log, []byte(twoGPULog), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{nil, []string{"GPU 0, 2 samples", "the log holds GPUs 0, 1", "NVIDIA H100 80GB HBM3", "rating 700 W", "peak 34 °C"}},
		{[]string{"--gpu=1"}, []string{"GPU 1, 2 samples", "peak 71 °C", "rating 700 W", "not assumed   the GPU is not a GB10"}},
	} {
		var stdout, stderr bytes.Buffer
		if status := run(append([]string{"report", log}, tc.args...), &stdout, &stderr); status != 0 {
			t.Fatalf("%v: status %d: %s", tc.args, status, stderr.String())
		}
		for _, w := range tc.want {
			if !strings.Contains(stdout.String(), w) {
				t.Errorf("%v: the report lacks %q:\n%s", tc.args, w, stdout.String())
			}
		}
		if strings.Contains(stdout.String(), "rating 240 W") || strings.Contains(stdout.String(), "busy at 80–120 W") {
			t.Errorf("%v: GB10's rating or plateau on an H100:\n%s", tc.args, stdout.String())
		}
	}
}

// From Prometheus too, the GPU is the one the exporter named
// (spark_gpu_info) with its power limit: an H100's 700 W, not GB10's 240 W
// nor its plateau; a GB10 keeps both.
func TestReportPrometheusNamesTheGPU(t *testing.T) {
	for _, tc := range []struct {
		name    string
		limit   string
		rating  float64
		plateau bool
	}{
		{"NVIDIA H100 80GB HBM3", "700", 700, false},
		{"NVIDIA GB10", "", 240, true},
	} {
		url := fakePrometheusNamed(t, tc.name, func(q string) [][2]any {
			switch {
			case strings.Contains(q, "spark_gpu_info"):
				return [][2]any{{1700000000, "1"}}
			case strings.Contains(q, "spark_gpu_power_limit_watts") && tc.limit != "":
				return [][2]any{{1700000000, tc.limit}}
			case strings.Contains(q, "temperature") || strings.Contains(q, "power_watts"):
				return [][2]any{{1700000000, "60"}, {1700000001, "61"}}
			}
			return nil
		})
		var stdout, stderr bytes.Buffer
		if status := run([]string{"report", "--prometheus.url=" + url, "--instance=spark", "--from=1699999000", "--to=1700001000", "--json"}, &stdout, &stderr); status != 0 {
			t.Fatalf("%s: status %d: %s", tc.name, status, stderr.String())
		}
		var r struct {
			GPUName *string  `json:"gpu_name"`
			Rating  *float64 `json:"power_rating_watts"`
			Plateau *float64 `json:"plateau_seconds"`
		}
		if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		if r.GPUName == nil || *r.GPUName != tc.name || r.Rating == nil || *r.Rating != tc.rating || (r.Plateau != nil) != tc.plateau {
			t.Errorf("%s: name %v, rating %v, plateau %v; want %s, %v W, plateau %v", tc.name, r.GPUName, r.Rating, r.Plateau, tc.name, tc.rating, tc.plateau)
		}
	}
}
