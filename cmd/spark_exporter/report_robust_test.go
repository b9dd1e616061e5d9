package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
)

// Issue 28: `report` bounded in memory and time whatever its input, on the
// built binary. The bounds are resources, not timings: the kernel kills a
// report past its CPU time (ulimit -t), and its peak resident memory
// (getrusage's maxrss) must stay under the test's figure.

// reportBinary runs the built binary's report command with cpuSecs of CPU
// time and checks that its peak resident memory stayed under memMiB; it
// returns the exit status, stdout and stderr.
func reportBinary(t *testing.T, memMiB, cpuSecs int, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	script := fmt.Sprintf(`ulimit -t %d && exec "$0" report "$@"`, cpuSecs)
	cmd := exec.CommandContext(ctx, "sh", append([]string{"-c", script, testexporter.Binary(t)}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	startSmall(t)
	if err := cmd.Run(); err != nil && cmd.ProcessState == nil {
		t.Fatal(err)
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok && ru.Maxrss > int64(memMiB)<<10 {
		t.Errorf("report %v: peak resident memory %d MiB, over %d MiB", args, ru.Maxrss>>10, memMiB)
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

// writeLog writes lines to a log file in a temporary directory.
func writeLog(t *testing.T, name string, lines []string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// rowsAt are log rows (ISO 8601 in UTC, temperature, power) every step
// from start.
func rowsAt(start time.Time, step time.Duration, n int) []string {
	var out []string
	for i := 0; i < n; i++ {
		out = append(out, fmt.Sprintf("%s, %d, %.2f W", start.Add(time.Duration(i)*step).UTC().Format(time.RFC3339Nano), 60+i%5, 95+float64(i%7)))
	}
	return out
}

type reportJSON struct {
	Samples         int
	DurationSeconds float64 `json:"duration_seconds"`
	Start, End      string
	EnergyWh        *float64 `json:"energy_wh"`
	Backward        struct {
		RepeatedHour int `json:"repeated_hour_samples"`
		LeftOut      int `json:"left_out_samples"`
		FirstLine    int `json:"first_line"`
	} `json:"time_stepped_back"`
	Memory *struct {
		OOMKills     *int     `json:"oom_kills"`
		StallMinutes *float64 `json:"memory_stall_minutes"`
		Lowest       *float64 `json:"lowest_headroom_bytes"`
	}
	Verdict string
}

func decodeReport(t *testing.T, stdout string) reportJSON {
	t.Helper()
	var r reportJSON
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("not a JSON report (%v): %.300s", err, stdout)
	}
	return r
}

// Item 3: a log of two runs a year apart, and one that starts at 1970
// (a clock not yet set), report within 512 MiB: the silence between runs
// costs nothing per interval.
func TestReportTimeGapsCostNoMemory(t *testing.T) {
	header := "timestamp, temperature.gpu, power.draw [W]"
	run := time.Date(2025, 11, 24, 14, 0, 0, 0, time.UTC)
	for name, lines := range map[string][]string{
		"a year apart": append(append([]string{header}, rowsAt(run, 5*time.Second, 100)...), rowsAt(run.AddDate(1, 0, 0), 5*time.Second, 100)...),
		"from 1970":    append(append([]string{header}, rowsAt(time.Unix(0, 0), 5*time.Second, 100)...), rowsAt(run, 5*time.Second, 100)...),
	} {
		t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
			status, stdout, stderr := reportBinary(t, 512, 60, writeLog(t, "gap.csv", lines), "--json")
			if status != 0 {
				t.Fatalf("status %d: %s", status, stderr)
			}
			if r := decodeReport(t, stdout); r.Samples != 200 || r.DurationSeconds < 300*24*3600 {
				t.Errorf("%d samples over %v s; want the 200 rows, over the months between the runs", r.Samples, r.DurationSeconds)
			}
		})
	}
}

// Item 4: a report is linear in the log's rows. 60,000 rows at 5 ms (five
// minutes of a fast logger) took minutes when each row re-analysed the
// whole window (20,000 rows took 20 s, and the cost grew with the square);
// the report must come within 60 s of CPU time (a few seconds natively,
// room for an emulated arm64 binary) and 1 GiB.
func TestReportIsLinearInRows(t *testing.T) {
	lines := append([]string{"timestamp, temperature.gpu, power.draw [W], utilization.gpu [%]"}, "")
	start := time.Date(2025, 11, 24, 14, 0, 0, 0, time.UTC)
	lines = lines[:1]
	const rows = 60000
	for i := 0; i < rows; i++ {
		lines = append(lines, fmt.Sprintf("%s, %d, %d W, 97 %%", start.Add(time.Duration(i)*5*time.Millisecond).Format("2006/01/02 15:04:05.000"), 70+i*20/rows, 100+i%3))
	}
	status, stdout, stderr := reportBinary(t, 1024, 60, writeLog(t, "fast.csv", lines), "--json", "--timezone=UTC")
	if status != 0 {
		t.Fatalf("status %d: %.500s", status, stderr)
	}
	if r := decodeReport(t, stdout); r.Samples != rows {
		t.Errorf("%d samples, want all %d rows", r.Samples, rows)
	}
}

// Item 5: a log in local time across the fall-back to standard time
// repeats an hour; its samples are kept, in order, and counted. A clock
// set back otherwise leaves samples out, counted and named by line, never
// silently.
func TestReportTimeThatStepsBack(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skip("no time zone database:", err)
	}
	// 2025-10-26 00:00 to 02:00 UTC: 02:00–03:00 CEST, then 02:00–03:00
	// CET again on the wall clock.
	var lines []string
	start := time.Date(2025, 10, 26, 0, 0, 0, 0, time.UTC)
	for i := 0; i < 1440; i++ {
		at := start.Add(time.Duration(i) * 5 * time.Second).In(berlin)
		lines = append(lines, fmt.Sprintf("%s, %d, 98.00 W", at.Format("2006/01/02 15:04:05.000"), 70+i/200))
	}
	status, stdout, stderr := reportBinary(t, 1024, 60, writeLog(t, "dst.csv", lines), "--json", "--timezone=Europe/Berlin", "--gpu.name=NVIDIA GB10")
	if status != 0 {
		t.Fatalf("status %d: %s", status, stderr)
	}
	r := decodeReport(t, stdout)
	if r.Samples != 1440 || r.DurationSeconds != 7195 || r.Backward.RepeatedHour != 720 {
		t.Errorf("%d samples over %v s, %d in the repeated hour; want 1440 over 7195 s, 720", r.Samples, r.DurationSeconds, r.Backward.RepeatedHour)
	}
	if !strings.HasSuffix(r.Start, "+02:00") || !strings.HasSuffix(r.End, "+01:00") {
		t.Errorf("start %s, end %s: the offsets are not kept", r.Start, r.End)
	}

	// A clock set back by ten minutes mid-log (no daylight saving in UTC).
	run := time.Date(2025, 11, 24, 14, 0, 0, 0, time.UTC)
	stepped := append(rowsAt(run, 5*time.Second, 240), rowsAt(run.Add(10*time.Minute), 5*time.Second, 240)...)
	status, stdout, stderr = reportBinary(t, 1024, 60, writeLog(t, "back.csv", stepped), "--gpu.name=NVIDIA GB10")
	if status != 0 {
		t.Fatalf("status %d: %s", status, stderr)
	}
	for _, want := range []string{"120 sample(s) left out", "line 241"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the report does not say %q:\n%s", want, stdout)
		}
	}
}

// fakePrometheus answers every query from values: per query, the points
// of one series (time in Unix seconds, value as Prometheus writes it),
// labelled instance="spark" and, for spark_gpu_info, name=gpuName; a
// query values does not know has no series.
func fakePrometheus(t *testing.T, values func(query string) [][2]any) string {
	return fakePrometheusNamed(t, "", values)
}

func fakePrometheusNamed(t *testing.T, gpuName string, values func(query string) [][2]any) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.FormValue("query")
		points := values(q)
		metric := map[string]string{"instance": "spark"}
		if strings.Contains(q, "spark_gpu_info") && gpuName != "" {
			metric["name"] = gpuName
		}
		var result any = []any{}
		kind := "vector"
		switch {
		case strings.HasSuffix(r.URL.Path, "query_range") || strings.HasSuffix(q, "s]"):
			kind = "matrix"
			if len(points) > 0 {
				result = []any{map[string]any{"metric": metric, "values": points}}
			}
		case len(points) > 0:
			result = []any{map[string]any{"metric": metric, "value": points[len(points)-1]}}
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"status": "success", "data": map[string]any{"resultType": kind, "result": result}})
	}), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String()
}

// Item 3 through Prometheus: a server whose samples sit at t = 0, 1 and
// 9e9 s (a hostile or broken one) costs no step per interval between.
func TestReportPrometheusTimeGap(t *testing.T) {
	url := fakePrometheus(t, func(q string) [][2]any {
		if strings.Contains(q, "temperature") || strings.Contains(q, "power_watts") {
			return [][2]any{{1e9, "60"}, {1e9 + 1, "61"}, {6e9, "62"}}
		}
		return nil
	})
	status, stdout, stderr := reportBinary(t, 512, 60, "--prometheus.url="+url, "--instance=spark", "--from=1000000000", "--to=6000000000", "--json")
	if status != 0 {
		t.Fatalf("status %d: %s", status, stderr)
	}
	if r := decodeReport(t, stdout); r.Samples != 3 {
		t.Errorf("%d samples, want the 3 served", r.Samples)
	}
}

// Item 7: NaN and ±Inf from Prometheus are no figures: absent from the
// text, null in the JSON, never "-9223372036854775808 OOM kills" nor a
// JSON encoding error.
func TestReportPrometheusNaNAndInf(t *testing.T) {
	url := fakePrometheus(t, func(q string) [][2]any {
		return [][2]any{{1700000000, "NaN"}, {1700000060, "+Inf"}, {1700000120, "-Inf"}}
	})
	status, stdout, stderr := reportBinary(t, 512, 60, "--prometheus.url="+url, "--instance=spark", "--from=1699999000", "--to=1700001000", "--json")
	if status != 0 {
		t.Fatalf("--json: status %d: %s", status, stderr)
	}
	r := decodeReport(t, stdout)
	if r.Memory == nil || r.Memory.OOMKills != nil || r.Memory.StallMinutes != nil || r.Memory.Lowest != nil || r.EnergyWh == nil && r.Samples > 0 {
		t.Errorf("figures made of NaN or Inf: %s", stdout)
	}
	if strings.HasPrefix(r.Start, "0001") {
		t.Errorf("a zero start time: %s", r.Start)
	}
	status, stdout, stderr = reportBinary(t, 512, 60, "--prometheus.url="+url, "--instance=spark", "--from=1699999000", "--to=1700001000")
	if status != 0 {
		t.Fatalf("text: status %d: %s", status, stderr)
	}
	for _, bad := range []string{"NaN", "Inf", "-9223372036854775808", "0001-01-01"} {
		if strings.Contains(stdout, bad) {
			t.Errorf("the report prints %s:\n%s", bad, stdout)
		}
	}
}

// Item 8: an answer over 16 MiB is refused at 16 MiB, as `status` does,
// naming the limit; the report does not hold the rest in memory.
func TestReportPrometheusAnswerIsCapped(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	chunk := bytes.Repeat([]byte("x"), 1<<20)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"instance":"`))
		for i := 0; i < 256; i++ { // 256 MiB unless the client stops reading
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
		w.Write([]byte(`"},"value":[1,"1"]}]}}`))
	}), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	status, _, stderr := reportBinary(t, 512, 60, "--prometheus.url=http://"+ln.Addr().String(), "--instance=spark", "--last=1h")
	if status != 1 || !strings.Contains(stderr, "over 16 MiB") {
		t.Errorf("status %d, stderr %.300q; want 1, naming the 16 MiB cap", status, stderr)
	}
}

// The small items: --from past int64 nanoseconds is refused, not wrapped
// to 1677; a line over 1 MiB is skipped by number; a missing log is named
// with the status --help gives for a source that cannot be read.
func TestReportSmallRobustness(t *testing.T) {
	status, _, stderr := reportBinary(t, 512, 60, "--prometheus.url=http://127.0.0.1:1", "--from=99999999999")
	if status != 2 || !strings.Contains(stderr, "--from") {
		t.Errorf("--from=99999999999: status %d, %q; want 2 naming --from (a start after now)", status, stderr)
	}

	run := time.Date(2025, 11, 24, 14, 0, 0, 0, time.UTC)
	lines := rowsAt(run, 5*time.Second, 20)
	lines[2] = strings.Repeat("9", 2<<20)
	status, _, stderr = reportBinary(t, 512, 60, writeLog(t, "long.csv", lines))
	if status != 0 || !strings.Contains(stderr, "line 3: longer than 1048576 bytes") {
		t.Errorf("a 2 MiB line: status %d, %q; want 0, the line skipped by number", status, stderr)
	}

	missing := filepath.Join(t.TempDir(), "missing.csv")
	status, _, stderr = reportBinary(t, 512, 60, missing)
	if status != reportFailed || !strings.Contains(stderr, "missing.csv") || !strings.Contains(stderr, "no such file") {
		t.Errorf("a missing log: status %d, %q; want %d naming missing.csv", status, stderr, reportFailed)
	}
	_, out, errs := reportBinary(t, 512, 60, "--help")
	if help := out + errs; !strings.Contains(help, "1: the source (the log file, Prometheus) could not be read") {
		t.Errorf("--help does not give the status of a log that cannot be read:\n%s", help)
	}
}

// startSmall lowers the test process's peak resident size to its present
// one before a child whose peak is measured starts: the child is cloned
// from the test binary, and its maxrss begins at that process's peak
// (mm->hiwater_rss), which earlier tests (hostile engines, full rings)
// raised. Writing 5 to clear_refs resets the peak (proc(5)).
func startSmall(t *testing.T) {
	t.Helper()
	debug.FreeOSMemory()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		t.Fatal(err)
	}
}
