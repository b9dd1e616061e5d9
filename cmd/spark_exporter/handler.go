package main

import (
	"fmt"
	"net/http"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/klauspost/compress/gzhttp"
	"github.com/klauspost/compress/gzip"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/spark-exporter/spark_exporter/collector"
	"github.com/spark-exporter/spark_exporter/internal/processcollector"
)

// metricsHandler serves the exporter's metrics. collect[] and exclude[]
// query parameters limit a scrape to some collectors, as node_exporter's
// collect[] does; those scrapes share the running collectors.
type metricsHandler struct {
	exporter    *collector.Exporter
	exporterReg *prometheus.Registry // nil when exporter metrics are disabled
	maxRequests int
	logger      log.Logger
	all         http.Handler
}

func newMetricsHandler(exporter *collector.Exporter, exporterMetrics bool, maxRequests int, logger log.Logger) *metricsHandler {
	h := &metricsHandler{exporter: exporter, maxRequests: maxRequests, logger: logger}
	if exporterMetrics {
		h.exporterReg = prometheus.NewRegistry()
		h.exporterReg.MustRegister(
			processcollector.New(),
			collectors.NewGoCollector(),
		)
	}
	h.all = h.handlerFor(exporter)
	if h.exporterReg != nil {
		// Instrument only the unfiltered handler, as node_exporter does.
		h.all = promhttp.InstrumentMetricHandler(h.exporterReg, h.all)
	}
	h.all = gzipped(h.all)
	return h
}

// gzipped compresses responses for clients that accept gzip (Prometheus
// does) at gzip's fastest level, with klauspost/compress. promhttp's own
// compression (the standard library's gzip at its default level) cost more
// CPU than the rest of a scrape together; this costs a tenth of it, for a
// response about a tenth larger (docs/performance.md).
var gzipped = func() func(http.Handler) http.HandlerFunc {
	wrap, err := gzhttp.NewWrapper(gzhttp.CompressionLevel(gzip.BestSpeed))
	if err != nil {
		panic(err) // a constant level that the library refuses
	}
	return wrap
}()

func (h *metricsHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	include, exclude := r.URL.Query()["collect[]"], r.URL.Query()["exclude[]"]
	if len(include) == 0 && len(exclude) == 0 {
		h.all.ServeHTTP(w, r)
		return
	}
	c, err := h.exporter.Filter(include, exclude)
	if err != nil {
		http.Error(w, fmt.Sprintf("Couldn't apply collect[]/exclude[]: %s", err), http.StatusBadRequest)
		return
	}
	gzipped(h.handlerFor(c)).ServeHTTP(w, r)
}

func (h *metricsHandler) handlerFor(c prometheus.Collector) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(versioncollector.NewCollector(name), c)
	var gatherers prometheus.Gatherers
	if h.exporterReg != nil {
		gatherers = append(gatherers, h.exporterReg)
	}
	gatherers = append(gatherers, reg)
	opts := promhttp.HandlerOpts{
		ErrorLog: errorLogger{h.logger},
		// A collector's error never fails the scrape: the registry's
		// spark_scrape_collector_success reports it.
		ErrorHandling:       promhttp.ContinueOnError,
		MaxRequestsInFlight: h.maxRequests,
		// gzipped compresses, at less cost.
		DisableCompression: true,
	}
	if h.exporterReg != nil {
		opts.Registry = h.exporterReg // for promhttp_metric_handler_errors_total
	}
	return promhttp.HandlerFor(gatherers, opts)
}

// errorLogger passes promhttp's errors to the exporter's log.
type errorLogger struct{ logger log.Logger }

func (l errorLogger) Println(v ...any) {
	level.Error(l.logger).Log("msg", "serving metrics", "err", fmt.Sprint(v...))
}
