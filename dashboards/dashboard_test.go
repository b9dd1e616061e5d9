// Package dashboards holds the Grafana dashboard; its tests check that the
// JSON imports cleanly and that every query is PromQL over metrics the
// exporter exports or the shipped rules record.
package dashboards

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/spark-exporter/spark_exporter/internal/promqltest"
)

const file = "spark.json"

type datasourceRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type target struct {
	RefID        string         `json:"refId"`
	Expr         string         `json:"expr"`
	LegendFormat string         `json:"legendFormat"`
	Format       string         `json:"format"`
	Datasource   *datasourceRef `json:"datasource"`
}

type panel struct {
	ID          int            `json:"id"`
	Type        string         `json:"type"`
	Title       string         `json:"title"`
	Description string         `json:"description"`
	Datasource  *datasourceRef `json:"datasource"`
	GridPos     struct {
		X, Y, W, H int
	} `json:"gridPos"`
	Targets     []target `json:"targets"`
	FieldConfig struct {
		Defaults struct {
			Unit string `json:"unit"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
	Panels []panel `json:"panels"` // a row's panels
}

type variable struct {
	Type       string          `json:"type"`
	Name       string          `json:"name"`
	Query      json.RawMessage `json:"query"`
	Definition string          `json:"definition"`
	Multi      bool            `json:"multi"`
	IncludeAll bool            `json:"includeAll"`
	Datasource *datasourceRef  `json:"datasource"`
}

type dashboard struct {
	UID           string `json:"uid"`
	Title         string `json:"title"`
	SchemaVersion int    `json:"schemaVersion"`
	Panels        []panel
	Templating    struct {
		List []variable `json:"list"`
	} `json:"templating"`
	Annotations struct {
		List []struct {
			Name       string         `json:"name"`
			Expr       string         `json:"expr"`
			Datasource *datasourceRef `json:"datasource"`
		} `json:"list"`
	} `json:"annotations"`
}

func load(t *testing.T) dashboard {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	var d dashboard
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("%s is not valid JSON: %v", file, err)
	}
	if dec.More() {
		t.Fatalf("%s: data after the dashboard object", file)
	}
	return d
}

// all returns every panel, those nested in rows included.
func (d dashboard) all() []panel {
	var out []panel
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			out = append(out, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

// Panel types of the current (React) Grafana; the Angular ones (graph,
// singlestat, table-old) no longer load in Grafana 12.
var currentPanelTypes = map[string]bool{
	"row": true, "timeseries": true, "stat": true, "gauge": true, "bargauge": true,
	"table": true, "state-timeline": true, "text": true,
}

// The classic JSON model as Grafana 12 writes it. Later versions migrate it
// on load; the migrations after 41 (hideFrom overrides, formatTime
// transformations) do not touch this dashboard.
const minSchemaVersion = 41

func TestDashboardShape(t *testing.T) {
	d := load(t)
	if d.UID == "" || d.Title == "" {
		t.Errorf("uid %q and title %q must be set: provisioning keys dashboards by uid", d.UID, d.Title)
	}
	if d.SchemaVersion < minSchemaVersion {
		t.Errorf("schemaVersion %d: want at least %d", d.SchemaVersion, minSchemaVersion)
	}

	ids := map[int]string{}
	for _, p := range d.all() {
		if p.ID == 0 {
			t.Errorf("panel %q has no id", p.Title)
		} else if other, dup := ids[p.ID]; dup {
			t.Errorf("panel id %d used by %q and %q", p.ID, other, p.Title)
		}
		ids[p.ID] = p.Title
		if !currentPanelTypes[p.Type] {
			t.Errorf("panel %q: type %q is not a current Grafana panel", p.Title, p.Type)
		}
		if p.Type == "row" {
			continue
		}
		if p.FieldConfig.Defaults.Unit == "" {
			t.Errorf("panel %q has no unit (fieldConfig.defaults.unit)", p.Title)
		}
		if p.Description == "" {
			t.Errorf("panel %q has no description", p.Title)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		if p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X < 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q: gridPos %+v outside the 24-column grid", p.Title, p.GridPos)
		}
	}

	// Overlapping panels are moved by Grafana on load, silently reordering
	// the dashboard.
	ps := d.all()
	for i, a := range ps {
		for _, b := range ps[i+1:] {
			ga, gb := a.GridPos, b.GridPos
			if ga.X < gb.X+gb.W && gb.X < ga.X+ga.W && ga.Y < gb.Y+gb.H && gb.Y < ga.Y+ga.H {
				t.Errorf("panels %q and %q overlap", a.Title, b.Title)
			}
		}
	}
}

// The dashboard must follow the datasource and instance variables, so one
// import serves any Prometheus and several Sparks.
func TestDashboardVariables(t *testing.T) {
	d := load(t)
	vars := map[string]variable{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v
	}
	ds, ok := vars["datasource"]
	if !ok || ds.Type != "datasource" || string(ds.Query) != `"prometheus"` {
		t.Errorf("want a datasource variable named datasource over prometheus, got %+v", ds)
	}
	inst, ok := vars["instance"]
	if !ok || inst.Type != "query" || !inst.Multi || !inst.IncludeAll {
		t.Errorf("want a multi-select instance query variable with All, got %+v", inst)
	}

	want := datasourceRef{Type: "prometheus", UID: "${datasource}"}
	check := func(where string, ref *datasourceRef) {
		if ref == nil || *ref != want {
			t.Errorf("%s: datasource %v, want %v", where, ref, want)
		}
	}
	check("variable instance", inst.Datasource)
	for _, p := range d.all() {
		if p.Type == "row" {
			continue
		}
		check(fmt.Sprintf("panel %q", p.Title), p.Datasource)
		for _, tg := range p.Targets {
			where := fmt.Sprintf("panel %q query %s", p.Title, tg.RefID)
			check(where, tg.Datasource)
			if !strings.Contains(tg.Expr, `instance=~"$instance"`) {
				t.Errorf("%s does not follow $instance: %s", where, tg.Expr)
			}
			// Series from two Sparks must be told apart in legends.
			if tg.Format != "table" && !strings.Contains(tg.LegendFormat, "{{instance}}") {
				t.Errorf("%s: legend %q does not name the instance", where, tg.LegendFormat)
			}
		}
	}
	for _, a := range d.Annotations.List {
		if a.Expr != "" {
			check(fmt.Sprintf("annotation %q", a.Name), a.Datasource)
		}
	}
}

// Grafana's built-in variables, replaced by representative values so the
// queries can be parsed as Prometheus would receive them.
var grafanaVariables = strings.NewReplacer(
	"$__rate_interval", "1m",
	"$__interval", "30s",
	"$__range_s", "21600",
	"$__range", "6h",
	"$instance", ".*",
)

var labelValues = regexp.MustCompile(`^label_values\(([a-zA-Z_:][a-zA-Z0-9_:]*),\s*[a-zA-Z_][a-zA-Z0-9_]*\)$`)

type query struct{ where, expr string }

func (d dashboard) queries(t *testing.T) []query {
	var qs []query
	for _, p := range d.all() {
		for _, tg := range p.Targets {
			qs = append(qs, query{fmt.Sprintf("panel %q query %s", p.Title, tg.RefID), tg.Expr})
		}
	}
	for _, a := range d.Annotations.List {
		if a.Expr != "" {
			qs = append(qs, query{fmt.Sprintf("annotation %q", a.Name), a.Expr})
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		// label_values(metric, label) is Grafana's, not PromQL: check its
		// metric as a selector.
		m := labelValues.FindStringSubmatch(v.Definition)
		if m == nil {
			t.Errorf("variable %s: query %q is not label_values(metric, label)", v.Name, v.Definition)
			continue
		}
		qs = append(qs, query{"variable " + v.Name, m[1]})
	}
	return qs
}

// Every query parses as PromQL and names only metrics the exporter exports
// (testdata/golden) or the rules record (rules/*.yml), beside Prometheus' own
// ALERTS and up, with labels and label values those metrics have.
func TestDashboardQueries(t *testing.T) {
	d := load(t)
	qs := d.queries(t)
	exprs := make([]string, len(qs))
	for i, q := range qs {
		exprs[i] = grafanaVariables.Replace(q.expr)
		if strings.Contains(exprs[i], "$") {
			t.Errorf("%s uses a variable this test does not know: %s", q.where, q.expr)
		}
	}
	known := promqltest.LoadKnown(t)
	for i, r := range promqltest.Parse(t, exprs) {
		if r.Error != "" {
			t.Errorf("%s does not parse: %s\n%s", qs[i].where, r.Error, exprs[i])
			continue
		}
		if len(r.Metrics) == 0 {
			t.Errorf("%s selects no metric: %s", qs[i].where, exprs[i])
		}
		for _, sel := range r.Selectors {
			if err := known.Check(sel); err != nil {
				t.Errorf("%s: %v", qs[i].where, err)
			}
		}
	}
}

// The fields GB10's NVML answers Not Supported for. A panel built on them
// alone would be empty on every Spark.
var absentOnGB10 = map[string]bool{
	"spark_gpu_memory_total_bytes": true,
	"spark_gpu_memory_used_bytes":  true,
	"spark_gpu_power_limit_watts":  true,
}

// No panel is empty on a GB10 because of a field GB10 lacks: each panel
// that shows one also queries something GB10 has, such as the
// spark_gpu_field_supported series that states the N/A.
func TestDashboardNotEmptyOnGB10(t *testing.T) {
	d := load(t)
	var exprs []string
	var owners []string
	for _, p := range d.all() {
		for _, tg := range p.Targets {
			exprs = append(exprs, grafanaVariables.Replace(tg.Expr))
			owners = append(owners, p.Title)
		}
	}
	results := promqltest.Parse(t, exprs)
	usesAbsent := map[string]bool{}
	hasPresent := map[string]bool{}
	for i, r := range results {
		absent := false
		for _, m := range r.Metrics {
			if absentOnGB10[m] {
				absent = true
			}
		}
		if absent {
			usesAbsent[owners[i]] = true
		} else if len(r.Metrics) > 0 {
			hasPresent[owners[i]] = true
		}
	}
	for title := range usesAbsent {
		if !hasPresent[title] {
			t.Errorf("panel %q shows only fields GB10 lacks: add a query GB10 answers (e.g. spark_gpu_field_supported) with an N/A mapping", title)
		}
	}
	if len(usesAbsent) == 0 {
		t.Error("no panel shows the nvidia-smi memory view: the dashboard should state where it is N/A")
	}
}
