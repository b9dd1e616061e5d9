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
	status := run([]string{"report", "../../testdata/report/guide-noheader-malformed.csv", "--json", "--svg", svg}, &stdout, &stderr)
	if status != 0 {
		t.Fatalf("status %d, stderr %s", status, stderr.String())
	}
	var r struct {
		Throttle struct{ Episodes []struct{ Evidence string } }
		Verdict  string
	}
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil || len(r.Throttle.Episodes) != 1 || !strings.Contains(r.Verdict, "signature only; clocks not logged") {
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
	for _, tc := range []struct {
		args   []string
		status int
		names  string
	}{
		{[]string{"report"}, 2, "--prometheus.url"},
		{[]string{"report", garbage}, 2, "line 2"},
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
