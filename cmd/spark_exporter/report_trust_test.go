package main

import (
	"strings"
	"testing"
)

// `report` on input anyone may hand it, on the built binary: a Prometheus
// answer and a thermal log are bounded in what they can make it print.

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
