package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/klauspost/compress/gzhttp"
	"github.com/klauspost/compress/gzip"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/spark-exporter/spark_exporter/collector"
	"github.com/spark-exporter/spark_exporter/internal/connlimit"
	"github.com/spark-exporter/spark_exporter/internal/processcollector"
)

// metricsHandler serves the exporter's metrics; collect[] and exclude[] limit
// a scrape to some of the running collectors, as in node_exporter.
type metricsHandler struct {
	exporter *collector.Exporter
	// self holds the exporter's own metrics (process_*, go_*, promhttp_*)
	// for collect[] scrapes; nil when exporter metrics are disabled.
	self     *prometheus.Registry
	inFlight chan struct{} // one token per scrape in progress; nil: no limit
	logger   log.Logger
	all      http.Handler
}

func newMetricsHandler(exporter *collector.Exporter, exporterMetrics bool, maxRequests int, logger log.Logger) *metricsHandler {
	h := &metricsHandler{exporter: exporter, logger: logger}
	if maxRequests > 0 {
		h.inFlight = make(chan struct{}, maxRequests)
	}
	// An unfiltered scrape gathers one registry holding everything: each
	// registry gathered costs goroutines and two 1,000-metric channels.
	all := prometheus.NewRegistry()
	all.MustRegister(versioncollector.NewCollector(name), exporter)
	var registerer prometheus.Registerer // where promhttp_* go; none without exporter metrics
	if exporterMetrics {
		own := []prometheus.Collector{processcollector.New(), collectors.NewGoCollector()}
		h.self = prometheus.NewRegistry()
		h.self.MustRegister(own...)
		all.MustRegister(own...)
		registerer = registerers{all, h.self}
	}
	handler := promhttp.HandlerFor(all, h.options(registerer))
	handler = h.limit(handler)
	if exporterMetrics {
		// Instrument only the unfiltered handler, as node_exporter does.
		handler = promhttp.InstrumentMetricHandler(registerer, handler)
	}
	h.all = gzipped(handler)
	return h
}

// maxFilters bounds the collect[] and exclude[] parameters of a scrape:
// there are a handful of collectors, and each name costs a lookup.
const maxFilters = 32

// parseFilters reads a scrape's query: nothing but collect[] and exclude[].
// Anything else is refused rather than ignored, which would serve another
// scrape than the one asked: url.Values drops what it cannot parse silently.
func parseFilters(rawQuery string) (include, exclude []string, err error) {
	if rawQuery == "" {
		return nil, nil, nil
	}
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return nil, nil, fmt.Errorf("malformed query: %w", err)
	}
	n := 0
	for key, values := range q {
		switch key {
		case "collect[]":
			include = values
		case "exclude[]":
			exclude = values
		default:
			return nil, nil, fmt.Errorf("unknown query parameter %q: only collect[] and exclude[] are taken", key)
		}
		n += len(values)
	}
	if n > maxFilters {
		return nil, nil, fmt.Errorf("%d collect[] and exclude[] parameters, more than %d", n, maxFilters)
	}
	return include, exclude, nil
}

func (h *metricsHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	include, exclude, err := parseFilters(r.URL.RawQuery)
	if err != nil {
		http.Error(w, fmt.Sprintf("Couldn't apply collect[]/exclude[]: %s", err), http.StatusBadRequest)
		return
	}
	if len(include) == 0 && len(exclude) == 0 {
		h.all.ServeHTTP(w, r)
		return
	}
	c, err := h.exporter.Filter(include, exclude)
	if err != nil {
		http.Error(w, fmt.Sprintf("Couldn't apply collect[]/exclude[]: %s", err), http.StatusBadRequest)
		return
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(versioncollector.NewCollector(name), c)
	gatherers := prometheus.Gatherers{reg}
	var registerer prometheus.Registerer
	if h.self != nil {
		gatherers = append(gatherers, h.self)
		registerer = h.self
	}
	gzipped(h.limit(promhttp.HandlerFor(gatherers, h.options(registerer)))).ServeHTTP(w, r)
}

func (h *metricsHandler) options(registerer prometheus.Registerer) promhttp.HandlerOpts {
	return promhttp.HandlerOpts{
		ErrorLog: errorLogger{h.logger},
		// A collector's error is spark_scrape_collector_success 0, not a failed scrape.
		ErrorHandling: promhttp.ContinueOnError,
		// For promhttp_metric_handler_errors_total.
		Registry: registerer,
		// limit bounds the scrapes in flight, gzipped compresses.
		DisableCompression: true,
	}
}

// limit answers 503 to a scrape beyond --web.max-requests in flight. It is
// shared: promhttp's MaxRequestsInFlight is per handler, and a collect[]
// scrape builds its own.
func (h *metricsHandler) limit(next http.Handler) http.Handler {
	if h.inFlight == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case h.inFlight <- struct{}{}:
			defer func() { <-h.inFlight }()
			next.ServeHTTP(w, r)
		default:
			http.Error(w, fmt.Sprintf("Limit of concurrent requests reached (%d), try again later.", cap(h.inFlight)),
				http.StatusServiceUnavailable)
		}
	})
}

// gzipped compresses at gzip's fastest level with klauspost/compress:
// promhttp's own compression, the standard library's at its default level,
// costs more CPU than the rest of a scrape (docs/performance.md).
var gzipped = func() func(http.Handler) http.HandlerFunc {
	wrap, err := gzhttp.NewWrapper(gzhttp.CompressionLevel(gzip.BestSpeed))
	if err != nil {
		panic(err) // a constant level that the library refuses
	}
	return wrap
}()

// registerers registers a collector in several registries: the exporter's
// own metrics serve unfiltered and collect[] scrapes alike.
type registerers []prometheus.Registerer

func (rs registerers) Register(c prometheus.Collector) error {
	for i, r := range rs {
		if err := r.Register(c); err != nil {
			for _, done := range rs[:i] {
				done.Unregister(c)
			}
			return err
		}
	}
	return nil
}

func (rs registerers) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := rs.Register(c); err != nil {
			panic(err)
		}
	}
}

func (rs registerers) Unregister(c prometheus.Collector) bool {
	all := true
	for _, r := range rs {
		all = r.Unregister(c) && all
	}
	return all
}

// errorLogger passes promhttp's errors to the exporter's log.
type errorLogger struct{ logger log.Logger }

func (l errorLogger) Println(v ...any) {
	level.Error(l.logger).Log("msg", "serving metrics", "err", fmt.Sprint(v...))
}

// connKey is the request context's key for its connection (withConn).
type connKey struct{}

// oneAnswerAtATime answers 503, and closes the connection, to an HTTP/1
// request asked before the client took the previous answer: a client that
// pipelines scrapes and never reads them would take every --web.max-requests
// slot. Prometheus does not pipeline; HTTP/2 multiplexes and is left alone.
func oneAnswerAtATime(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if nc, ok := r.Context().Value(connKey{}).(net.Conn); ok && r.ProtoMajor == 1 {
			if unsent, ok := connlimit.Unsent(nc); ok && unsent > 0 {
				w.Header().Set("Connection", "close")
				http.Error(w, "The previous answer on this connection has not been read: read each answer before asking again.",
					http.StatusServiceUnavailable)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// withConn is the server's ConnContext, for oneAnswerAtATime.
func withConn(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// responseWriteTimeout bounds the sending of a response, once it is ready:
// a scrape's response is tens of KB, which any client that reads takes in
// well under this; one that does not read is given up.
const responseWriteTimeout = 10 * time.Second

// maxPooledResponse is the largest response buffer kept for the next one.
const maxPooledResponse = 4 << 20

var responseBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// whole makes every response in memory, then sends it within
// responseWriteTimeout, so that the --web.max-requests slot is given back
// before the network write: a client that does not read would hold it. A
// connection is answered one request at a time, so the buffers are bounded
// by --web.max-connections.
func whole(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		buf := responseBuffers.Get().(*bytes.Buffer)
		defer func() {
			if buf.Cap() <= maxPooledResponse {
				buf.Reset()
				responseBuffers.Put(buf)
			}
		}()
		rec := &recorder{ResponseWriter: w, body: buf}
		next.ServeHTTP(rec, r)
		if rec.status == 0 {
			rec.status = http.StatusOK
		}
		if buf.Len() > 0 && w.Header().Get("Content-Length") == "" && w.Header().Get("Transfer-Encoding") == "" {
			w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
		}
		// Not supported only by a writer that is not the server's.
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(responseWriteTimeout))
		w.WriteHeader(rec.status)
		w.Write(buf.Bytes())
	})
}

// recorder keeps a response's status and body; its headers are those of
// the response it stands for, which are sent only with the status.
type recorder struct {
	http.ResponseWriter
	status int
	body   *bytes.Buffer
}

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(p)
}

// Flush does nothing: the response is sent whole.
func (r *recorder) Flush() {}

// Unwrap lets http.ResponseController reach the connection's deadlines.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
