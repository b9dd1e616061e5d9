package main

import (
	"fmt"
	"net/http"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/spark-exporter/spark_exporter/collector"
)

// metricsHandler serves the exporter's metrics. collect[] and exclude[]
// query parameters limit a scrape to some collectors, as node_exporter's
// collect[] does; those scrapes share the running collectors.
type metricsHandler struct {
	exporter    *collector.Exporter
	exporterReg *prometheus.Registry // nil when exporter metrics are disabled
	// inFlight holds a token per scrape in progress, filtered or not, up
	// to --web.max-requests; nil without a limit. promhttp's own limit
	// would count each filtered scrape's handler apart.
	inFlight chan struct{}
	logger   log.Logger
	all      http.Handler
}

func newMetricsHandler(exporter *collector.Exporter, exporterMetrics bool, maxRequests int, logger log.Logger) *metricsHandler {
	h := &metricsHandler{exporter: exporter, logger: logger}
	if maxRequests > 0 {
		h.inFlight = make(chan struct{}, maxRequests)
	}
	if exporterMetrics {
		h.exporterReg = prometheus.NewRegistry()
		h.exporterReg.MustRegister(
			collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
			collectors.NewGoCollector(),
		)
	}
	h.all = h.handlerFor(exporter)
	if h.exporterReg != nil {
		// Instrument only the unfiltered handler, as node_exporter does.
		h.all = promhttp.InstrumentMetricHandler(h.exporterReg, h.all)
	}
	return h
}

func (h *metricsHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.inFlight != nil {
		select {
		case h.inFlight <- struct{}{}:
			defer func() { <-h.inFlight }()
		default:
			// promhttp's answer to the same condition.
			http.Error(w, fmt.Sprintf("Limit of concurrent requests reached (%d), try again later.", cap(h.inFlight)),
				http.StatusServiceUnavailable)
			return
		}
	}
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
	h.handlerFor(c).ServeHTTP(w, r)
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
		ErrorHandling: promhttp.ContinueOnError,
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
