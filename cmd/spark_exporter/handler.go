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

type metricsHandler struct {
	exporter *collector.Exporter
	// self is nil when exporter metrics are disabled.
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

// maxFilters: there are a handful of collectors, and each name costs a lookup.
const maxFilters = 32

// parseFilters refuses anything but collect[] and exclude[] rather than serve
// another scrape than the one asked: url.Values drops what it cannot parse.
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
		ErrorHandling:      promhttp.ContinueOnError,
		Registry:           registerer,
		DisableCompression: true,
	}
}

// limit is shared: promhttp's MaxRequestsInFlight is per handler, and a collect[] scrape builds its own.
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

// gzipped: promhttp's own compression costs more CPU than the rest of a scrape.
// Huffman coding alone, without matching: a tenth of a scrape's instructions less than
// the fastest level, for a body about twice its size (20 KB).
var gzipped = func() func(http.Handler) http.HandlerFunc {
	wrap, err := gzhttp.NewWrapper(gzhttp.CompressionLevel(gzip.HuffmanOnly))
	if err != nil {
		panic(err) // a constant level that the library refuses
	}
	return wrap
}()

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

type errorLogger struct{ logger log.Logger }

func (l errorLogger) Println(v ...any) {
	level.Error(l.logger).Log("msg", "serving metrics", "err", fmt.Sprint(v...))
}

type connKey struct{}

// oneAnswerAtATime: a client that pipelines scrapes and never reads them would
// take every --web.max-requests slot. HTTP/2 multiplexes and is left alone.
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

func withConn(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// responseWriteTimeout: a response is tens of KB; a client that does not read is given up.
const responseWriteTimeout = 10 * time.Second

// maxPooledResponse is the largest response buffer kept for the next one.
const maxPooledResponse = 4 << 20

var responseBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// whole gives the --web.max-requests slot back before the network write, which
// a client that does not read would hold; buffers are bounded by --web.max-connections.
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

// recorder's headers are those of the response it stands for, sent only with the status.
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
