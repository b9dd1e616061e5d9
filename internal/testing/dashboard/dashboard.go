// Package dashboard gives the exporter's tests the PromQL of the shipped
// Grafana dashboards (dashboards/*.json): dashboards/'s tests check it
// parses and names only exported or recorded metrics; the end-to-end test
// (test/e2e) runs it against a real Prometheus. The dashboards are read by
// Grafana's own types, in tools/dashboards (`dashboards -queries`), whose
// module holds Grafana's SDK so that the exporter's go.mod does not. Test
// scaffolding: nothing here ships.
package dashboard

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Query is one PromQL expression of a dashboard and where it is.
type Query struct {
	File   string `json:"file"`   // spark.json, fleet.json
	Where  string `json:"where"`  // `panel "Pool headroom" query A`, `variable instance`, …
	Panel  string `json:"panel"`  // the panel's title; "" for a variable or an annotation
	Expr   string `json:"expr"`   // as written, Grafana variables included
	Legend string `json:"legend"` // legendFormat
	Table  bool   `json:"table"`  // format table: labels become columns
}

// Queries lists the PromQL of every panel target, annotation and query
// variable of every dashboard in root/dashboards, as Grafana's types read
// them. A variable's label_values(metric, label) is Grafana's, not PromQL:
// its metric stands for it, as a selector.
func Queries(t testing.TB, root string) []Query {
	t.Helper()
	cmd := exec.Command("go", "run", ".", "-queries", filepath.Join(root, "dashboards"))
	cmd.Dir = filepath.Join(root, "tools", "dashboards")
	// The SDK is pure Go; no cgo keeps this build off the C compiler.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tools/dashboards -queries: %v\n%s", err, stderr.String())
	}
	var qs []Query
	if err := json.Unmarshal(out, &qs); err != nil {
		t.Fatalf("tools/dashboards -queries: %v", err)
	}
	if len(qs) == 0 {
		t.Fatal("tools/dashboards -queries listed no query")
	}
	return qs
}

// AbsentOnGB10 are the metrics of fields GB10's NVML answers Not Supported
// for (nvidia-smi's [N/A]: there is no VRAM, only the unified pool, and no
// enforced power limit). The exporter leaves them out there, so a query on
// them is empty on every Spark: a panel built on them alone would be too,
// and the end-to-end test expects exactly these queries to come back empty.
var AbsentOnGB10 = map[string]bool{
	"spark_gpu_memory_total_bytes": true,
	"spark_gpu_memory_used_bytes":  true,
	"spark_gpu_power_limit_watts":  true,
}

// Fabric says whether a metric is the fabric collector's: a Spark without
// RDMA devices (no ConnectX-7 driver, or a run on testdata/sys/spark) has
// none but spark_fabric_field_supported, and an exporter older than the
// collector none at all, so the fabric row may be empty.
func Fabric(metric string) bool {
	return strings.HasPrefix(metric, "spark_fabric_")
}

// Vars are the values given to Grafana's variables when a query is run
// outside Grafana.
type Vars struct {
	RateInterval string // $__rate_interval
	Interval     string // $__interval
	Range        string // $__range
	RangeSeconds int    // $__range_s
	Instance     string // $instance, a regular expression
}

// Replace substitutes the variables in expr. Anything still starting with
// $ afterwards is a variable Vars does not know.
func (v Vars) Replace(expr string) string {
	// Longer names first: $__range_s before $__range.
	return strings.NewReplacer(
		"$__rate_interval", v.RateInterval,
		"$__interval", v.Interval,
		"$__range_s", strconv.Itoa(v.RangeSeconds),
		"$__range", v.Range,
		"$instance", v.Instance,
	).Replace(expr)
}
