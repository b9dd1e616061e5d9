package main

import (
	"net/http"
	"time"

	"github.com/spark-exporter/spark_exporter/collector"
	"github.com/spark-exporter/spark_exporter/internal/status"
)

// statusRoutes are the status page at / and its model at /api/v1/status,
// by ServeMux pattern. They show the collectors' latest results, those
// /metrics rendered (collector.Exporter.State), running the collectors
// when those are older than maxAge (status.DefaultMaxAge; benchmarks give
// 0). The page and the figures its script refreshes (status.ViewPath) are
// not served when --web.telemetry-path is / (the metrics keep the path),
// nor the JSON or the figures when the metrics are served at their path;
// the page then links to what is served, and without its figures does not
// refresh itself.
func statusRoutes(exporter *collector.Exporter, metricsPath string, maxAge time.Duration) map[string]http.Handler {
	source := status.NewSource(exporter)
	source.MaxAge = maxAge
	apiServed := metricsPath != status.APIPath
	pageServed := metricsPath != "/"
	viewServed := pageServed && metricsPath != status.ViewPath
	h := status.NewHandler(source, metricsPath, apiServed, viewServed)
	routes := map[string]http.Handler{}
	if pageServed {
		routes["/{$}"] = gzipped(h.Page())
	}
	if viewServed {
		routes[status.ViewPath] = gzipped(h.View())
	}
	if apiServed {
		routes[status.APIPath] = gzipped(h.API())
	}
	return routes
}
