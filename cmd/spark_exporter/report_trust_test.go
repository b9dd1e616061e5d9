package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// `report` on input anyone may hand it, on the built binary: a Prometheus
// answer and a thermal log are bounded in what they can make it print.

// listedJSON is what these tests read of a report.
type listedJSON struct {
	Throttle struct {
		Episodes []struct {
			Start, End      time.Time
			DurationSeconds float64 `json:"duration_seconds"`
		}
		LeftOut int `json:"episodes_left_out"`
	}
	Memory *struct {
		StallMinutes *float64 `json:"memory_stall_minutes"`
		Contention   []any
		LeftOut      int   `json:"contention_left_out"`
		Plans        []any `json:"plans_stopped_fitting"`
	}
	Alerts []struct {
		Start, End time.Time
	}
	AlertsLeftOut int  `json:"alerts_left_out"`
	PointsLeftOut *int `json:"points_left_out"`
}

func decodeListed(t *testing.T, stdout string) listedJSON {
	t.Helper()
	var r listedJSON
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("not a JSON report (%v): %.300s", err, stdout)
	}
	return r
}

// An ALERTS or plan point at 1e13 s and a memory stall of 1e306 s are
// none of the run's: --json does not fail on the year, the text prints no
// alert outside the run nor a 300-digit figure, and the points left out
// are counted.
func TestReportPrometheusAnswerOutsideTheRun(t *testing.T) {
	const from, to = 1700000000, 1700003600
	url := fakePrometheus(t, func(q string) [][2]any {
		switch {
		case strings.Contains(q, "ALERTS"), strings.Contains(q, "spark_plan_required_bytes"):
			return [][2]any{{from + 60, "1"}, {from + 61, "1"}, {1e13, "1"}}
		case strings.Contains(q, "pressure_stall"):
			return [][2]any{{from, "0"}, {from + 60, "1e306"}}
		case strings.Contains(q, "power_watts"):
			return [][2]any{{from + 60, "90"}, {from + 120, "91"}}
		case strings.Contains(q, "temperature"):
			return [][2]any{{from + 60, "60"}, {from + 120, "61"}}
		}
		return nil
	})
	args := []string{"--prometheus.url=" + url, "--instance=spark", fmt.Sprintf("--from=%d", from), fmt.Sprintf("--to=%d", to)}
	status, stdout, stderr := reportBinary(t, 256, 60, append(args, "--json")...)
	if status != 0 {
		t.Fatalf("--json: status %d: %s", status, stderr)
	}
	r := decodeListed(t, stdout)
	for _, a := range r.Alerts {
		if a.Start.Unix() < from || a.End.Unix() > to {
			t.Errorf("an alert outside the run: %v → %v", a.Start, a.End)
		}
	}
	if r.Memory == nil || r.Memory.StallMinutes != nil || len(r.Memory.Plans) != 1 {
		t.Errorf("a stall of 1e306 s in a 1 h run, or the plan's point in the run not read: %s", stdout)
	}
	if r.PointsLeftOut == nil || *r.PointsLeftOut < 2 {
		t.Errorf("points left out: %v, want the ALERTS and the plan point at 1e13 s counted", r.PointsLeftOut)
	}
	status, stdout, stderr = reportBinary(t, 256, 60, args...)
	if status != 0 {
		t.Fatalf("text: status %d: %s", status, stderr)
	}
	if n := strings.Count(stdout, "\nalert "); n != 1 || regexp.MustCompile(`[0-9]{20}`).MatchString(stdout) || !strings.Contains(stdout, "point(s) of Prometheus's answers") {
		t.Errorf("%d alert lines (want the one in the run), a 20-digit figure, or no count of the points left out:\n%s", n, stdout)
	}
}

// A 6 h window of spark_thermal_state, ALERTS and contention flapping at
// every step (5,400 stretches each) lists ten of each, the rest counted.
func TestReportPrometheusFlappingIsListedBounded(t *testing.T) {
	const from, to = 1700000000, 1700000000 + 6*3600
	url := fakePrometheus(t, func(q string) [][2]any {
		var points [][2]any
		for at := from; at <= to; at += 2 {
			on := (at/2)%2 == 1
			switch {
			case strings.Contains(q, `state="throttled"`):
				points = append(points, [2]any{at, map[bool]string{true: "1", false: "0"}[on]})
			case strings.Contains(q, "ALERTS"), strings.Contains(q, "spark_workloads"):
				if on {
					points = append(points, [2]any{at, "1"})
				}
			case strings.Contains(q, "power_watts"):
				points = append(points, [2]any{at, "90"})
			case strings.Contains(q, "temperature"):
				points = append(points, [2]any{at, "60"})
			}
		}
		return points
	})
	args := []string{"--prometheus.url=" + url, "--instance=spark", fmt.Sprintf("--from=%d", from), fmt.Sprintf("--to=%d", to)}
	status, stdout, stderr := reportBinary(t, 256, 120, append(args, "--json")...)
	if status != 0 {
		t.Fatalf("--json: status %d: %s", status, stderr)
	}
	r := decodeListed(t, stdout)
	if len(r.Throttle.Episodes) != 10 || r.Throttle.LeftOut < 5000 || len(r.Alerts) != 10 || r.AlertsLeftOut < 5000 ||
		r.Memory == nil || len(r.Memory.Contention) != 10 || r.Memory.LeftOut < 5000 {
		t.Errorf("listed: %d episodes (%d left out), %d alert stretches (%d left out); want 10 of each, the rest counted",
			len(r.Throttle.Episodes), r.Throttle.LeftOut, len(r.Alerts), r.AlertsLeftOut)
	}
	status, stdout, stderr = reportBinary(t, 256, 120, args...)
	if n := strings.Count(stdout, "\n"); status != 0 || n > 60 || !strings.Contains(stdout, "more episode(s) not listed") {
		t.Errorf("text: status %d, %d lines: %.2000s%s", status, n, stdout, stderr)
	}
}

// flappingLog writes a log of n rows a second apart whose thermal slowdown
// flag flaps every two rows, with one 10-minute stay in the middle.
func flappingLog(t *testing.T, n int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "flapping.csv")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, "timestamp, temperature.gpu, power.draw [W], utilization.gpu [%], clocks.sm [MHz], clocks_event_reasons.active")
	start := time.Date(2025, 11, 24, 14, 0, 0, 0, time.UTC)
	for i := 0; i < n; i++ {
		reasons := "0x0000000000000000"
		if (i/2)%2 == 1 || i >= n/2 && i < n/2+600 {
			reasons = "0x0000000000000020"
		}
		fmt.Fprintf(w, "%s, 80, 95.00 W, 97 %%, 2400 MHz, %s\n", start.Add(time.Duration(i)*time.Second).Format("2006/01/02 15:04:05.000"), reasons)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// A flapping log (25,000 episodes in 100,000 rows) lists the first, the
// last and the longest of its episodes and counts the rest, in the JSON,
// the text and the picture, within 64 MiB (83 MiB and 10 MB of JSON when
// every episode was listed).
func TestReportFlappingLogIsListedBounded(t *testing.T) {
	const rows = 100000
	log := flappingLog(t, rows)
	status, stdout, stderr := reportBinary(t, 64, 120, log, "--json", "--thermal.window=30s")
	if status != 0 {
		t.Fatalf("--json: status %d: %.300s", status, stderr)
	}
	r := decodeListed(t, stdout)
	eps := r.Throttle.Episodes
	if len(eps) != 10 || r.Throttle.LeftOut < 20000 || len(stdout) > 64<<10 {
		t.Fatalf("%d episodes listed, %d left out, %d bytes of JSON; want 10, the rest counted", len(eps), r.Throttle.LeftOut, len(stdout))
	}
	start := time.Date(2025, 11, 24, 14, 0, 0, 0, time.UTC)
	longest := false
	for _, e := range eps {
		longest = longest || e.DurationSeconds >= 600
	}
	if eps[0].Start.Sub(start) > 10*time.Second || start.Add(rows*time.Second).Sub(eps[9].End) > 10*time.Second || !longest {
		t.Errorf("listed: not the first, the last and the 10-minute one: %+v", eps)
	}
	svg := filepath.Join(t.TempDir(), "run.svg")
	status, stdout, stderr = reportBinary(t, 64, 120, log, "--thermal.window=30s", "--svg", svg)
	info, err := os.Stat(svg)
	if status != 0 || err != nil || info.Size() > 256<<10 || strings.Count(stdout, "\n") > 40 || !strings.Contains(stdout, "more episode(s) not listed") {
		t.Errorf("text and picture: status %d, %d lines, svg %v: %.2000s%s", status, strings.Count(stdout, "\n"), info, stdout, stderr)
	}
}

// --columns naming a column twice is refused naming it, not read with the
// last of the two winning.
func TestReportColumnsNamedTwice(t *testing.T) {
	log := writeLog(t, "noheader.csv", []string{"2025/11/24 14:00:00.000, 60, 95.00, 90.0"})
	for _, columns := range []string{"timestamp,temperature.gpu,power.draw,power.draw", "timestamp,temp_c,power.draw,temperature.gpu"} {
		status, _, stderr := reportBinary(t, 256, 60, log, "--columns="+columns)
		if status != reportUsage || !strings.Contains(stderr, "twice") || !strings.Contains(stderr, "--columns") {
			t.Errorf("--columns=%s: status %d, %q; want %d naming the column given twice", columns, status, stderr, reportUsage)
		}
	}
}
