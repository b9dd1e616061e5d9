package main

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"

	"github.com/spark-exporter/spark_exporter/collector"
	"github.com/spark-exporter/spark_exporter/internal/status"
)

// statusRoutes are the status page at / and its model at /api/v1/status,
// by ServeMux pattern. They gather the collectors /metrics runs, in a
// registry of their own without the exporter's process_* and go_* metrics,
// which the page does not show. The page is not served when
// --web.telemetry-path is / (the metrics keep the path), nor the JSON when
// the metrics are served at its path; the page then links to what is
// served and does not refresh itself. A model younger than maxAge is
// served again (status.DefaultMaxAge; benchmarks give 0).
func statusRoutes(exporter *collector.Exporter, metricsPath string, maxAge time.Duration) map[string]http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(versioncollector.NewCollector(name), exporter)
	source := status.NewSource(reg, func() (status.ThermalInput, bool) {
		snap, ok := exporter.ThermalSnapshot()
		if !ok {
			return status.ThermalInput{}, false
		}
		cfg, _ := exporter.ThermalConfig()
		return status.ThermalInput{Snapshot: snap, Config: cfg}, true
	})
	source.MaxAge = maxAge
	apiServed := metricsPath != status.APIPath
	h := status.NewHandler(source, metricsPath, apiServed)
	routes := map[string]http.Handler{}
	if metricsPath != "/" {
		routes["/{$}"] = gzipped(h.Page())
	}
	if apiServed {
		routes[status.APIPath] = gzipped(h.API())
	}
	return routes
}
