package dashboards

// These tests check that the JSON imports cleanly and that every query is
// PromQL over metrics the exporter exports or the shipped rules record.

import (
	"fmt"
	"strings"
	"testing"

	"github.com/spark-exporter/spark_exporter/internal/testing/dashboard"
	"github.com/spark-exporter/spark_exporter/internal/testing/promqltest"
)

func load(t *testing.T) dashboard.Dashboard {
	t.Helper()
	d, err := dashboard.Load(dashboard.File)
	if err != nil {
		t.Fatalf("%s: %v", dashboard.File, err)
	}
	return d
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
	for _, p := range d.All() {
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
	ps := d.All()
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
	vars := map[string]dashboard.Variable{}
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

	want := dashboard.DatasourceRef{Type: "prometheus", UID: "${datasource}"}
	check := func(where string, ref *dashboard.DatasourceRef) {
		if ref == nil || *ref != want {
			t.Errorf("%s: datasource %v, want %v", where, ref, want)
		}
	}
	check("variable instance", inst.Datasource)
	for _, p := range d.All() {
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
	d := load(t)
	qs, err := d.Queries()
	if err != nil {
		t.Fatal(err)
	}
	exprs := make([]string, len(qs))
	for i, q := range qs {
		exprs[i] = grafanaVariables.Replace(q.Expr)
		if strings.Contains(exprs[i], "$") {
			t.Errorf("%s uses a variable this test does not know: %s", q.Where, q.Expr)
		}
	}
	known := promqltest.LoadKnown(t)
	for i, r := range promqltest.Parse(t, exprs) {
		if r.Error != "" {
			t.Errorf("%s does not parse: %s\n%s", qs[i].Where, r.Error, exprs[i])
			continue
		}
		if len(r.Metrics) == 0 {
			t.Errorf("%s selects no metric: %s", qs[i].Where, exprs[i])
		}
		for _, sel := range r.Selectors {
			if err := known.Check(sel); err != nil {
				t.Errorf("%s: %v", qs[i].Where, err)
			}
		}
	}
}

// No panel is empty on a GB10 because of a field GB10 lacks: each panel
// that shows one also queries something GB10 has, such as the
// spark_gpu_field_supported series that states the N/A.
func TestDashboardNotEmptyOnGB10(t *testing.T) {
	d := load(t)
	var exprs []string
	var owners []string
	for _, p := range d.All() {
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
			if dashboard.AbsentOnGB10[m] {
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
