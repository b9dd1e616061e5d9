// Package e2e is the end-to-end test of the whole chain a Spark's owner
// relies on: the exporter on a fixture /proc tree and the GB10 stand-in
// NVML library → a real Prometheus 3 scraping it every second and
// evaluating the shipped rules → a real Alertmanager routed as
// examples/alertmanager.yml → a webhook the test runs, where it checks what
// pages. It also runs every query of the Grafana dashboard against that
// Prometheus.
//
// The tests carry the e2e build tag: `make e2e` runs them (and `make test`,
// hence CI). docs/e2e.md says what runs, how long it takes and how to read
// a failure.
package e2e
