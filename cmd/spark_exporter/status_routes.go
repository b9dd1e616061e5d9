package main

import (
	"net/http"
	"time"

	"github.com/spark-exporter/spark_exporter/collector"
	"github.com/spark-exporter/spark_exporter/internal/status"
)

// statusRoutes run the collectors when their state is older than maxAge. The
// metrics keep their path when --web.telemetry-path takes one of these.
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
