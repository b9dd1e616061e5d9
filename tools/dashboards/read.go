package main

//lint:file-ignore SA1019 the classic dashboard model (dashboard, not dashboardv2), which Grafana 12 imports and provisions by default; schema v2 still needs a feature flag there (docs/dashboards.md)

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"sync"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/cog/variants"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
)

var registerPlugins sync.Once

// load reads a dashboard file with the SDK's types, strictly: a field that
// Grafana's schema does not have, or a value of the wrong type, is an
// error. Panel options and queries are read by their plugin's types.
func load(path string) (dashboard.Dashboard, error) {
	registerPlugins.Do(plugins.RegisterDefaultPlugins)
	var d dashboard.Dashboard
	data, err := os.ReadFile(path)
	if err != nil {
		return d, err
	}
	// The strict reading reports every field Grafana's schema lacks, but
	// v0.0.22 drops the panels it reads (a panel's empty error list is
	// returned as a non-nil error), so the value is read a second time,
	// leniently.
	var strict dashboard.Dashboard
	if err := strict.UnmarshalJSONStrict(data); err != nil {
		if errs, ok := err.(cog.BuildErrors); !ok || len(errs) > 0 {
			return d, fmt.Errorf("%s: %w", path, err)
		}
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return d, fmt.Errorf("%s: %w", path, err)
	}
	return d, nil
}

// panels lists every panel, those inside rows included, rows left out.
func panels(d dashboard.Dashboard) []dashboard.Panel {
	var out []dashboard.Panel
	for _, p := range d.Panels {
		if p.Panel != nil {
			out = append(out, *p.Panel)
		}
		if p.RowPanel != nil {
			out = append(out, p.RowPanel.Panels...)
		}
	}
	return out
}

// Query is one PromQL expression of a dashboard and where it is. The
// exporter's tests (dashboards/, test/e2e) read these as JSON.
type Query struct {
	File   string `json:"file"`
	Where  string `json:"where"` // `panel "Pool headroom" query A`, `variable instance`, …
	Panel  string `json:"panel"` // "" for a variable or an annotation
	Expr   string `json:"expr"`  // as written, Grafana variables included
	Legend string `json:"legend"`
	Table  bool   `json:"table"` // format table: labels become columns, no legend
}

var labelValues = regexp.MustCompile(`^label_values\(([a-zA-Z_:][a-zA-Z0-9_:]*),\s*[a-zA-Z_][a-zA-Z0-9_]*\)$`)

// queries lists the PromQL of every panel target, annotation and query
// variable. A variable's label_values(metric, label) is Grafana's, not
// PromQL: its metric stands for it, as a selector.
func queries(file string, d dashboard.Dashboard) ([]Query, error) {
	var qs []Query
	for _, p := range panels(d) {
		title := deref(p.Title)
		for _, t := range p.Targets {
			q, ok := prometheusQuery(t)
			if !ok {
				return nil, fmt.Errorf("panel %q: a %T query, not Prometheus", title, t)
			}
			qs = append(qs, Query{
				File:   file,
				Where:  fmt.Sprintf("panel %q query %s", title, deref(q.RefId)),
				Panel:  title,
				Expr:   q.Expr,
				Legend: deref(q.LegendFormat),
				Table:  q.Format != nil && *q.Format == prometheus.PromQueryFormatTable,
			})
		}
	}
	for _, a := range d.Annotations.List {
		if a.Expr != nil {
			qs = append(qs, Query{File: file, Where: fmt.Sprintf("annotation %q", a.Name), Expr: *a.Expr})
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != dashboard.VariableTypeQuery {
			continue
		}
		m := labelValues.FindStringSubmatch(deref(v.Definition))
		if m == nil {
			return nil, fmt.Errorf("variable %s: query %q is not label_values(metric, label)", v.Name, deref(v.Definition))
		}
		qs = append(qs, Query{File: file, Where: "variable " + v.Name, Expr: m[1]})
	}
	return qs, nil
}

// prometheusQuery is a panel's query as Prometheus': a value when built, a
// pointer when read.
func prometheusQuery(q variants.Dataquery) (*prometheus.Dataquery, bool) {
	switch q := q.(type) {
	case *prometheus.Dataquery:
		return q, true
	case prometheus.Dataquery:
		return &q, true
	}
	return nil, false
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
