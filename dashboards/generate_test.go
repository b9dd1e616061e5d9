// Package dashboards holds the Grafana dashboards of spark_exporter:
// spark.json, one Spark or several; fleet.json, every Spark in one table.
// They are generated from Go code on Grafana's foundation SDK in
// tools/dashboards (its own module, so the SDK stays out of the exporter's
// go.mod): edit the code there, then run `go generate ./dashboards` (or
// `make dashboards`). Hand edits to the JSON fail the tests.
//
// The directive sits in a test file: go generate reads those too, and the
// directory then holds no product code (internal/testing/layout).
package dashboards

//go:generate go -C ../tools/dashboards run . -out ../../dashboards
