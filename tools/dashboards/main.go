// Command dashboards writes the Grafana dashboards of spark_exporter,
// dashboards/*.json, from Go code on Grafana's foundation SDK
// (github.com/grafana/grafana-foundation-sdk/go): `go generate ./dashboards`
// runs it. It is its own module so that the SDK stays out of the exporter's
// go.mod.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
)

// dashboards are the files written, by name in dashboards/.
var dashboards = map[string]func() *dashboard.DashboardBuilder{
	"spark.json": spark,
}

// render is a dashboard's file: indented JSON as Grafana's "Export" writes
// it, PromQL's < and > left as they are, a final newline.
func render(b *dashboard.DashboardBuilder) ([]byte, error) {
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

func main() {
	out := flag.String("out", ".", "directory to write the dashboards to")
	flag.Parse()
	for name, build := range dashboards {
		data, err := render(build())
		if err == nil {
			err = os.WriteFile(filepath.Join(*out, name), data, 0o644)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "dashboards: %s: %v\n", name, err)
			os.Exit(1)
		}
	}
}
