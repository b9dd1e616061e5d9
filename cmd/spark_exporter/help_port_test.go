package main

import (
	"regexp"
	"testing"

	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
)

// --help never shows a port of the 9100–9999 exporter range the exporter
// keeps out of (docs/metrics.md#flags), not even in an example.
func TestHelpShowsNoExporterRangePort(t *testing.T) {
	out, err := testexporter.Command(t, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("--help: %v\n%s", err, out)
	}
	if !regexp.MustCompile("`" + defaultPort + "`").Match(out) {
		t.Errorf("--help does not give %s as the listen address example:\n%s", defaultPort, out)
	}
	if m := regexp.MustCompile(`:9[1-9]\d\d\b`).FindAll(out, -1); len(m) > 0 {
		t.Errorf("--help shows %q, inside the 9100–9999 exporter range", m)
	}
}
