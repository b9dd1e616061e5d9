package main

import (
	"bytes"
	"strings"
	"testing"
)

// Issue 26, item 6: public logs from real machines (testdata/reallogs, each
// with its source and its author's conclusion in its header). The report
// gives a verdict that matches the author's conclusion, or refuses the log
// with one line naming the column or the format; it never exits 0 having
// misread a column. docs/thermal.md tabulates them.
func TestReportOnRealLogs(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		status int
		says   string // in the verdict (status 0) or the one-line error
	}{
		// A GB10 logged without a header: timestamp, SM clock, utilisation.
		// Read as the guide's temperature and power it was "peak 890 °C".
		{"GB10 clock collapse, headerless", []string{"gb10-clock-collapse-headerless.csv"}, 2,
			`temperature.gpu reads "2223 MHz"`},
		{"query-gpu without timestamps", []string{"no-timestamp-query-gpu.csv"}, 2,
			"no timestamp column: give the interval the log was written at (--log.interval)"},
		{"query-gpu without timestamps, interval given", []string{"no-timestamp-query-gpu.csv", "--log.interval=1s"}, 0,
			"cannot tell: the samples never cover a whole 10m00s window without a gap (the run: 12s); peak 56 °C; no throttle episode"},
		{"query-gpu without power", []string{"query-gpu-no-power.csv"}, 2,
			"has no power.draw column (it has temperature.gpu, timestamp, utilization.gpu)"},
		{"dmon -o TD without power or temperature", []string{"dmon-dt-without-power.txt"}, 2,
			"the log (nvidia-smi dmon) has no temperature.gpu column (it has clocks.sm, index, timestamp, utilization.gpu)"},
		{"dmon without -o DT", []string{"dmon-load-start.txt"}, 2,
			"nvidia-smi dmon without -o DT prints no timestamps"},
		{"dmon without -o DT, interval given", []string{"dmon-load-start.txt", "--log.interval=1s"}, 0,
			"cannot tell: the samples never cover a whole 10m00s window without a gap (the run: 8s)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"report", "../../testdata/reallogs/" + tc.args[0]}, tc.args[1:]...)
			var stdout, stderr bytes.Buffer
			status := run(args, &stdout, &stderr)
			got := stderr.String()
			if status == 0 {
				got = stdout.String()
			} else if strings.Count(strings.TrimSpace(got), "\n") != 0 {
				t.Errorf("the refusal takes more than one line:\n%s", got)
			}
			if status != tc.status || !strings.Contains(got, tc.says) {
				t.Errorf("status %d, %s\nwant %d saying %q", status, got, tc.status, tc.says)
			}
			if status == 0 && strings.Contains(got, "plateau (the platform's cap") {
				t.Errorf("GB10's plateau judged on a log that names no GB10:\n%s", got)
			}
		})
	}
}
