// Command dashboards writes the Grafana dashboards of spark_exporter,
// dashboards/*.json, from Go code on Grafana's foundation SDK
// (github.com/grafana/grafana-foundation-sdk/go): `go generate ./dashboards`
// runs it. It is its own module so that the SDK stays out of the exporter's
// go.mod.
package main

//lint:file-ignore SA1019 the classic dashboard model (dashboard, not dashboardv2), which Grafana 12 imports and provisions by default; schema v2 still needs a feature flag there (docs/dashboards.md)

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// dashboards are the files written, by name in dashboards/.
var dashboards = map[string]func() *dashboard.DashboardBuilder{
	"spark.json": spark,
	"fleet.json": fleet,
}

// render is a dashboard's file: indented JSON as Grafana's "Export" writes
// it, PromQL's < and > left as they are, a final newline.
func render(b cog.Builder[dashboard.Dashboard]) ([]byte, error) {
	d, err := b.Build()
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(d); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// printQueries writes every query of the dashboards in dir, as read by the
// SDK's types, to stdout as a JSON array of Query.
func printQueries(dir string) error {
	var all []Query
	for _, name := range names() {
		d, err := load(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		qs, err := queries(name, d)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		all = append(all, qs...)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", " ")
	return enc.Encode(all)
}

// names are the dashboards' file names, sorted.
func names() []string {
	var ns []string
	for n := range dashboards {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return ns
}

func main() {
	out := flag.String("out", ".", "directory to write the dashboards to")
	list := flag.String("queries", "", "instead, print the PromQL of the dashboards in this directory as JSON (for the exporter's tests)")
	flag.Parse()
	if *list != "" {
		if err := printQueries(*list); err != nil {
			fmt.Fprintf(os.Stderr, "dashboards: %v\n", err)
			os.Exit(1)
		}
		return
	}
	for _, name := range names() {
		data, err := render(dashboards[name]())
		if err == nil {
			err = os.WriteFile(filepath.Join(*out, name), data, 0o644)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "dashboards: %s: %v\n", name, err)
			os.Exit(1)
		}
	}
}
