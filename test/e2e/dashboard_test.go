//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/testing/dashboard"
	"github.com/spark-exporter/spark_exporter/internal/testing/promqltest"
)

// checkDashboard runs every query of every dashboard (dashboards/*.json)
// against the running Prometheus, with Grafana's variables as Grafana would
// set them for this Prometheus (1 s scrapes) and "All" Sparks selected. Each
// must return data, except those on metrics GB10 does not have
// (dashboard.AbsentOnGB10, docs/e2e.md), which must return none, and the
// fabric row's when no Spark of the run has a ConnectX-7. Then the fleet
// table must list every Spark, one row each, mixing nothing.
func checkDashboard(t *testing.T, s *stack, root string, instances []string) {
	queries := dashboard.Queries(t, root)
	// $__range: the dashboard's time range, here everything recorded.
	span := int(time.Since(s.ready).Seconds())
	vars := dashboard.Vars{
		// Grafana's max(4 × scrape interval, interval + scrape interval).
		RateInterval: (4 * scrapeInterval).String(),
		Interval:     scrapeInterval.String(),
		Range:        fmt.Sprintf("%ds", span),
		RangeSeconds: span,
		Instance:     ".*",
	}
	exprs := make([]string, len(queries))
	for i, q := range queries {
		exprs[i] = vars.Replace(q.Expr)
	}
	parsed := promqltest.Parse(t, exprs)

	// Whether any Spark of this run has RDMA devices.
	rdma, err := s.query(`spark_fabric_field_supported{field="rdma"} == 1`)
	if err != nil {
		t.Fatal(err)
	}
	withFabric := len(rdma) > 0

	checked := 0
	for i, q := range queries {
		if strings.Contains(exprs[i], "$") {
			t.Errorf("%s uses a Grafana variable this test does not set: %s", q.File+": "+q.Where, q.Expr)
			continue
		}
		if parsed[i].Error != "" {
			t.Errorf("%s does not parse: %s", q.File+": "+q.Where, parsed[i].Error)
			continue
		}
		absent, fabric := false, false
		for _, m := range parsed[i].Metrics {
			absent = absent || dashboard.AbsentOnGB10[m]
			fabric = fabric || dashboard.Fabric(m)
		}
		result, err := s.query(exprs[i])
		switch {
		case err != nil:
			t.Errorf("%s: %v\n%s", q.File+": "+q.Where, err, exprs[i])
		case fabric && !withFabric:
			// No Spark of this run has a ConnectX-7 (testdata/sys/spark):
			// the fabric row stays empty, as on a Spark without the driver.
		case absent:
			if len(result) > 0 {
				t.Errorf("%s returned data, yet it is listed as absent on GB10 (dashboard.AbsentOnGB10, docs/e2e.md): %s", q.File+": "+q.Where, exprs[i])
			}
		case len(result) == 0:
			t.Errorf("%s returned no data: %s", q.File+": "+q.Where, exprs[i])
		default:
			checked++
		}
	}
	t.Logf("%d of %d dashboard queries returned data", checked, len(queries))

	// The instance variable, label_values(spark_exporter_build_info,
	// instance), offers every Spark.
	body := s.prom.Get(t, "/api/v1/label/instance/values?"+url.Values{"match[]": {"spark_exporter_build_info"}}.Encode())
	var values struct {
		Data []string `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &values); err != nil {
		t.Fatal(err)
	}
	slices.Sort(values.Data)
	if !slices.Equal(values.Data, instances) {
		t.Errorf("the instance variable offers %v, want %v", values.Data, instances)
	}

	checkFleet(t, s, queries, vars, instances)
}

// checkFleet shows that the fleet table (dashboards/fleet.json) lists every
// Spark of the run, one row each, and mixes nothing: each column's value for
// a Spark, with every Spark selected, is the value the same query gives with
// that Spark alone selected. All queries read the same instant, a few
// scrapes back, so that they see the same samples.
func checkFleet(t *testing.T, s *stack, queries []dashboard.Query, vars dashboard.Vars, instances []string) {
	at := time.Now().Add(-5 * scrapeInterval)
	listed := map[string]bool{}
	columns := 0
	for _, q := range queries {
		if q.File != "fleet.json" || !q.Table {
			continue
		}
		columns++
		all := vars
		all.Instance = ".*"
		rows, err := s.queryAt(all.Replace(q.Expr), at)
		if err != nil {
			t.Errorf("fleet.json %s: %v", q.Where, err)
			continue
		}
		byInstance := map[string]float64{}
		for _, r := range rows {
			inst := r.Metric["instance"]
			if _, dup := byInstance[inst]; dup || inst == "" || !slices.Contains(instances, inst) {
				t.Errorf("fleet.json %s: a row for %q (duplicate, unnamed or unknown) in %v", q.Where, inst, rows)
			}
			byInstance[inst] = r.Value
			listed[inst] = true
		}
		for _, inst := range instances {
			one := vars
			one.Instance = regexp.QuoteMeta(inst)
			alone, err := s.queryAt(one.Replace(q.Expr), at)
			if err != nil {
				t.Errorf("fleet.json %s for %s: %v", q.Where, inst, err)
				continue
			}
			v, inTable := byInstance[inst]
			switch {
			case len(alone) > 1:
				t.Errorf("fleet.json %s for %s alone: %d rows, want at most one", q.Where, inst, len(alone))
			case len(alone) == 1 && (!inTable || alone[0].Value != v):
				t.Errorf("fleet.json %s: %s's row with every Spark selected is %v (listed %v), alone %v: the column mixes Sparks", q.Where, inst, v, inTable, alone[0].Value)
			case len(alone) == 0 && inTable:
				t.Errorf("fleet.json %s: %s has a row only when other Sparks are selected", q.Where, inst)
			}
		}
	}
	if columns == 0 {
		t.Fatal("fleet.json has no table query")
	}
	for _, inst := range instances {
		if !listed[inst] {
			t.Errorf("the fleet table does not list %s", inst)
		}
	}
}
