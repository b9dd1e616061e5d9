// Package dashboard is the part of Grafana's JSON model that the checks of
// dashboards/spark.json read: dashboards/'s tests check the JSON and the
// PromQL; the end-to-end test (test/e2e) runs every query against a real
// Prometheus. Test scaffolding: nothing here ships.
package dashboard

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// File is the dashboard's file name, in dashboards/.
const File = "spark.json"

type DatasourceRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type Target struct {
	RefID        string         `json:"refId"`
	Expr         string         `json:"expr"`
	LegendFormat string         `json:"legendFormat"`
	Format       string         `json:"format"`
	Datasource   *DatasourceRef `json:"datasource"`
}

type Panel struct {
	ID          int            `json:"id"`
	Type        string         `json:"type"`
	Title       string         `json:"title"`
	Description string         `json:"description"`
	Datasource  *DatasourceRef `json:"datasource"`
	GridPos     struct {
		X, Y, W, H int
	} `json:"gridPos"`
	Targets     []Target `json:"targets"`
	FieldConfig struct {
		Defaults struct {
			Unit string `json:"unit"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
	Panels []Panel `json:"panels"` // a row's panels
}

type Variable struct {
	Type       string          `json:"type"`
	Name       string          `json:"name"`
	Query      json.RawMessage `json:"query"`
	Definition string          `json:"definition"`
	Multi      bool            `json:"multi"`
	IncludeAll bool            `json:"includeAll"`
	Datasource *DatasourceRef  `json:"datasource"`
}

type Annotation struct {
	Name       string         `json:"name"`
	Expr       string         `json:"expr"`
	Datasource *DatasourceRef `json:"datasource"`
}

type Dashboard struct {
	UID           string `json:"uid"`
	Title         string `json:"title"`
	SchemaVersion int    `json:"schemaVersion"`
	Panels        []Panel
	Templating    struct {
		List []Variable `json:"list"`
	} `json:"templating"`
	Annotations struct {
		List []Annotation `json:"list"`
	} `json:"annotations"`
}

// Load reads a dashboard's JSON: one object and nothing after it.
func Load(path string) (Dashboard, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Dashboard{}, err
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	var d Dashboard
	if err := dec.Decode(&d); err != nil {
		return Dashboard{}, fmt.Errorf("not valid JSON: %w", err)
	}
	if dec.More() {
		return Dashboard{}, fmt.Errorf("data after the dashboard object")
	}
	return d, nil
}

// All returns every panel, those nested in rows included.
func (d Dashboard) All() []Panel {
	var out []Panel
	var walk func([]Panel)
	walk = func(ps []Panel) {
		for _, p := range ps {
			out = append(out, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
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

// Query is one PromQL expression of the dashboard and where it is.
type Query struct {
	Where string // `panel "Pool headroom" query A`, `variable instance`, …
	Panel string // the panel's title; "" for a variable or an annotation
	Expr  string // as written, Grafana variables included
}

var labelValues = regexp.MustCompile(`^label_values\(([a-zA-Z_:][a-zA-Z0-9_:]*),\s*[a-zA-Z_][a-zA-Z0-9_]*\)$`)

// Queries lists the PromQL of every panel target, annotation and query
// variable. A variable's label_values(metric, label) is Grafana's, not
// PromQL: its metric stands for it, as a selector.
func (d Dashboard) Queries() ([]Query, error) {
	var qs []Query
	for _, p := range d.All() {
		for _, tg := range p.Targets {
			qs = append(qs, Query{fmt.Sprintf("panel %q query %s", p.Title, tg.RefID), p.Title, tg.Expr})
		}
	}
	for _, a := range d.Annotations.List {
		if a.Expr != "" {
			qs = append(qs, Query{fmt.Sprintf("annotation %q", a.Name), "", a.Expr})
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := labelValues.FindStringSubmatch(v.Definition)
		if m == nil {
			return nil, fmt.Errorf("variable %s: query %q is not label_values(metric, label)", v.Name, v.Definition)
		}
		qs = append(qs, Query{"variable " + v.Name, "", m[1]})
	}
	return qs, nil
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
