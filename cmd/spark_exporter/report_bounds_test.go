package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf16"
)

// Issue 38, items 5–7, 10 and 12: `report`'s paths bounded whatever its
// input, on the built binary (SPARK_TEST_BINARY runs them on another
// build).

// countingPrometheus is fakePrometheus counting the queries it answered.
func countingPrometheus(t *testing.T, values func(query string) [][2]any) (string, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		q := r.FormValue("query")
		points := values(q)
		var result any = []any{}
		kind := "vector"
		metric := map[string]string{"instance": "spark"}
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
	return "http://" + ln.Addr().String(), &n
}

// Item 5: a spark_thermal_state flapping every minute over 6 h (180
// episodes) costs a fixed number of queries, not one per episode.
func TestReportPrometheusQueriesPerReport(t *testing.T) {
	const from = 1700000000
	url, queries := countingPrometheus(t, func(q string) [][2]any {
		var points [][2]any
		for at := from; at <= from+6*3600; at += 60 {
			v := "60"
			switch {
			case strings.Contains(q, `state="throttled"`):
				v = fmt.Sprint((at / 60) % 2)
			case strings.Contains(q, "clocks_event_seconds_total"):
				v = fmt.Sprint(at - from)
			case strings.Contains(q, "power_watts"):
				v = "90"
			}
			points = append(points, [2]any{at, v})
		}
		return points
	})
	status, stdout, stderr := reportBinary(t, 512, 60, "--prometheus.url="+url, "--instance=spark",
		fmt.Sprintf("--from=%d", from), fmt.Sprintf("--to=%d", from+6*3600), "--json")
	if status != 0 {
		t.Fatalf("status %d: %s", status, stderr)
	}
	var r struct {
		Throttle struct {
			Episodes []any
			LeftOut  int `json:"episodes_left_out"`
		}
	}
	json.Unmarshal([]byte(stdout), &r)
	episodes := len(r.Throttle.Episodes) + r.Throttle.LeftOut
	t.Logf("%d queries for %d episodes", queries.Load(), episodes)
	if n := queries.Load(); n > 30 || episodes < 100 {
		t.Errorf("%d queries for %d episodes; want at most 30 whatever the episodes", n, episodes)
	}
}

// Item 6: the CSV reader's plausibility rules for Prometheus too: 1e306 W,
// −1e6 W and points outside the range asked for are no readings; --json
// and the text never fail nor print +Inf or year 318857.
func TestReportPrometheusImplausibleValues(t *testing.T) {
	const from = 1700000000
	url := fakePrometheus(t, func(q string) [][2]any {
		switch {
		case strings.Contains(q, "power_watts"):
			return [][2]any{{from + 60, "1e306"}, {from + 120, "-1e6"}, {from + 180, "1e306"}, {1e13, "90"}}
		case strings.Contains(q, "temperature"):
			return [][2]any{{from + 60, "60"}, {from + 120, "61"}, {from + 180, "62"}, {1e13, "63"}}
		}
		return nil
	})
	args := []string{"--prometheus.url=" + url, "--instance=spark", fmt.Sprintf("--from=%d", from), fmt.Sprintf("--to=%d", from+3600)}
	status, stdout, stderr := reportBinary(t, 512, 60, append(args, "--json")...)
	if status != 0 || !json.Valid([]byte(stdout)) {
		t.Fatalf("--json: status %d: %s", status, stderr)
	}
	if r := decodeReport(t, stdout); r.Samples != 0 {
		t.Errorf("%d samples made of implausible readings: %s", r.Samples, stdout)
	}
	status, stdout, stderr = reportBinary(t, 512, 60, args...)
	if status != 0 {
		t.Fatalf("text: status %d: %s", status, stderr)
	}
	for _, bad := range []string{"Inf", "318857", "e+30", "-1000000"} {
		if strings.Contains(stdout, bad) {
			t.Errorf("the report prints %s:\n%s", bad, stdout)
		}
	}
}

// Item 7: 100,000 malformed lines are named by their first few and a
// count, on stderr and in the JSON; not one warning per line.
func TestReportMalformedLinesCounted(t *testing.T) {
	lines := rowsAt(time.Date(2025, 11, 24, 14, 0, 0, 0, time.UTC), 5*time.Second, 200)
	for i := 0; i < 100000; i++ {
		lines = append(lines, "2025/11/24 15:00:00.000, oops")
	}
	status, stdout, stderr := reportBinary(t, 512, 60, writeLog(t, "bad.csv", lines), "--json")
	if status != 0 {
		t.Fatalf("status %d: %.300s", status, stderr)
	}
	var r struct {
		Skipped []any `json:"skipped_lines"`
		Total   int   `json:"skipped_lines_total"`
	}
	json.Unmarshal([]byte(stdout), &r)
	if n := strings.Count(stderr, "\n"); n > 12 || !strings.Contains(stderr, "99990 more malformed lines skipped") {
		t.Errorf("%d lines of warnings: %.500s", n, stderr)
	}
	if len(r.Skipped) > 10 || r.Total != 100000 || len(stdout) > 64<<10 {
		t.Errorf("the JSON names %d skipped lines of %d, %d bytes", len(r.Skipped), r.Total, len(stdout))
	}
}

// Item 10: spans past what a time.Duration holds: timestamps from year 0
// to 9999 are malformed lines, not a negative duration; a huge
// --log.interval or --thermal.window is refused naming the flag.
func TestReportSpansPastADuration(t *testing.T) {
	lines := rowsAt(time.Date(2025, 11, 24, 14, 0, 0, 0, time.UTC), 5*time.Second, 200)
	lines = append([]string{"0000-01-01T00:00:00Z, 50, 90.00 W"}, append(lines, "9999-12-31T23:59:59Z, 50, 90.00 W")...)
	status, stdout, stderr := reportBinary(t, 512, 60, writeLog(t, "span.csv", lines))
	if status != 0 || strings.Contains(stdout, "-2562047h") || !strings.Contains(stderr, "year 0 is outside 1950–2199") {
		t.Errorf("year 0 to 9999: status %d, %s\n%s", status, stdout, stderr)
	}
	dmon := writeLog(t, "dmon.txt", []string{"# gpu   pwr gtemp mtemp    sm   mem   enc   dec  mclk  pclk", "# Idx     W     C     C     %     %     %     %   MHz   MHz", "    0    90    50     -    97     5     0     0  7000  2400"})
	for _, tc := range []struct {
		flags []string
		says  string
	}{
		{[]string{"--log.interval=1000000h"}, "--log.interval"},
		{[]string{"--log.interval=1s", "--thermal.interval=100000h", "--thermal.window=1000000h"}, "window (1000000h0m0s) is longer than 168h0m0s"},
	} {
		status, _, stderr := reportBinary(t, 512, 60, append([]string{dmon}, tc.flags...)...)
		if status != 2 || !strings.Contains(stderr, tc.says) {
			t.Errorf("%v: status %d, %q; want 2 saying %q", tc.flags, status, stderr, tc.says)
		}
	}
}

// Item 12: a UTF-16 log with its byte order mark (PowerShell's `>`) reads
// as the text it holds; a --timezone holding an escape is not echoed raw.
func TestReportUTF16AndEscapes(t *testing.T) {
	lines := append([]string{"timestamp, temperature.gpu, power.draw [W]"}, rowsAt(time.Date(2025, 11, 24, 14, 0, 0, 0, time.UTC), 5*time.Second, 200)...)
	text := strings.Join(lines, "\r\n") + "\r\n"
	var b bytes.Buffer
	b.Write([]byte{0xFF, 0xFE})
	for _, u := range utf16.Encode([]rune(text)) {
		b.Write([]byte{byte(u), byte(u >> 8)})
	}
	path := filepath.Join(t.TempDir(), "ps.csv")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	status, stdout, stderr := reportBinary(t, 512, 60, path, "--json")
	if status != 0 || decodeReport(t, stdout).Samples != 200 {
		t.Errorf("UTF-16: status %d, %.300s", status, stderr+stdout)
	}
	status, _, stderr = reportBinary(t, 512, 60, path, "--timezone=\x1b[2J\x1b]0;owned\x07Europe/Paris")
	if status != 2 || strings.ContainsAny(stderr, "\x1b\x07") {
		t.Errorf("--timezone with escapes: status %d, %q", status, stderr)
	}
}

// Item 8: a long clean log costs the memory of a window, not of its rows:
// 100,000 rows (28 hours at 1 s) within 64 MiB resident (about 110 MiB,
// 880 bytes a row, when every row was kept).
func TestReportMemoryBoundedByTheWindow(t *testing.T) {
	lines := rowsAt(time.Date(2025, 11, 24, 14, 0, 0, 0, time.UTC), time.Second, 100000)
	status, stdout, stderr := reportBinary(t, 64, 120, writeLog(t, "long.csv", lines), "--json", "--gpu.name=NVIDIA GB10")
	if status != 0 {
		t.Fatalf("status %d: %s", status, stderr)
	}
	if r := decodeReport(t, stdout); r.Samples != 100000 {
		t.Errorf("%d samples, want 100000", r.Samples)
	}
}
