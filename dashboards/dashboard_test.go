package dashboards

// The dashboards' layout, units, descriptions, variables and their match
// with what tools/dashboards generates are checked in tools/dashboards, on
// Grafana's own types. These tests check their PromQL against what the
// exporter exports and the shipped rules record.

import (
	"strings"
	"testing"

	"github.com/spark-exporter/spark_exporter/internal/testing/dashboard"
	"github.com/spark-exporter/spark_exporter/internal/testing/promqltest"
	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
)

// Grafana's built-in variables, replaced by representative values so the
// queries can be parsed as Prometheus would receive them.
var grafanaVariables = dashboard.Vars{
	RateInterval: "1m",
	Interval:     "30s",
	Range:        "6h",
	RangeSeconds: 21600,
	Instance:     ".*",
}

// Every query parses as PromQL and names only metrics the exporter exports
// (testdata/golden) or the rules record (rules/*.yml), beside Prometheus' own
// ALERTS and up, with labels and label values those metrics have.
func TestDashboardQueries(t *testing.T) {
	qs := dashboard.Queries(t, testexporter.Root(t))
	exprs := make([]string, len(qs))
	files := map[string]int{}
	for i, q := range qs {
		files[q.File]++
		exprs[i] = grafanaVariables.Replace(q.Expr)
		if strings.Contains(exprs[i], "$") {
			t.Errorf("%s: %s uses a variable this test does not know: %s", q.File, q.Where, q.Expr)
		}
	}
	for _, f := range []string{"spark.json", "fleet.json"} {
		if files[f] == 0 {
			t.Errorf("no query of %s was listed", f)
		}
	}
	known := promqltest.LoadKnown(t)
	for i, r := range promqltest.Parse(t, exprs) {
		if r.Error != "" {
			t.Errorf("%s: %s does not parse: %s\n%s", qs[i].File, qs[i].Where, r.Error, exprs[i])
			continue
		}
		if len(r.Metrics) == 0 {
			t.Errorf("%s: %s selects no metric: %s", qs[i].File, qs[i].Where, exprs[i])
		}
		for _, sel := range r.Selectors {
			if err := known.Check(sel); err != nil {
				t.Errorf("%s: %s: %v", qs[i].File, qs[i].Where, err)
			}
		}
	}
}

// No panel is empty on a GB10 because of a field GB10 lacks: each panel
// that shows one also queries something GB10 has, such as the
// spark_gpu_field_supported series that states the N/A.
func TestDashboardNotEmptyOnGB10(t *testing.T) {
	var exprs, owners []string
	for _, q := range dashboard.Queries(t, testexporter.Root(t)) {
		if q.Panel != "" {
			exprs = append(exprs, grafanaVariables.Replace(q.Expr))
			owners = append(owners, q.File+": "+q.Panel)
		}
	}
	usesAbsent := map[string]bool{}
	hasPresent := map[string]bool{}
	for i, r := range promqltest.Parse(t, exprs) {
		absent := false
		for _, m := range r.Metrics {
			absent = absent || dashboard.AbsentOnGB10[m]
		}
		if absent {
			usesAbsent[owners[i]] = true
		} else if len(r.Metrics) > 0 {
			hasPresent[owners[i]] = true
		}
	}
	for panel := range usesAbsent {
		if !hasPresent[panel] {
			t.Errorf("panel %s shows only fields GB10 lacks: add a query GB10 answers (e.g. spark_gpu_field_supported) with an N/A mapping", panel)
		}
	}
	if len(usesAbsent) == 0 {
		t.Error("no panel shows the nvidia-smi memory view: the dashboard should state where it is N/A")
	}
}
