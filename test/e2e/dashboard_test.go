//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/testing/dashboard"
	"github.com/spark-exporter/spark_exporter/internal/testing/promqltest"
)

// checkDashboard runs every query of every dashboard (dashboards/*.json)
// against the running Prometheus, with Grafana's variables as Grafana would set them
// for this Prometheus (1 s scrapes) and "All" Sparks selected. Each must
// return data, except those on metrics GB10 does not have
// (dashboard.AbsentOnGB10, docs/e2e.md), which must return none.
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
		absent := false
		for _, m := range parsed[i].Metrics {
			absent = absent || dashboard.AbsentOnGB10[m]
		}
		result, err := s.query(exprs[i])
		switch {
		case err != nil:
			t.Errorf("%s: %v\n%s", q.File+": "+q.Where, err, exprs[i])
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
}
