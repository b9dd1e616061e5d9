package main

import (
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/spark-exporter/spark_exporter/collector"
)

// gate is a collector whose Update waits until the gate opens; entered
// says that an Update is waiting.
type gate struct {
	open    chan struct{}
	entered chan struct{}
}

func (g *gate) Update(context.Context, chan<- prometheus.Metric) error {
	select {
	case g.entered <- struct{}{}:
	default:
	}
	<-g.open
	return nil
}

type idle struct{}

func (idle) Update(context.Context, chan<- prometheus.Metric) error { return nil }

func get(h http.Handler, target string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, target, nil))
	return w
}

// --web.max-requests bounds every scrape together, collect[] ones too,
// and the refusals of unfiltered scrapes are counted.
func TestMaxRequestsHoldsForEveryScrape(t *testing.T) {
	g := &gate{open: make(chan struct{}), entered: make(chan struct{}, 1)}
	exporter := collector.NewExporter(map[string]collector.Collector{"gate": g, "idle": idle{}}, nil, log.NewNopLogger())
	h := newMetricsHandler(exporter, true, 1, log.NewNopLogger())

	var wg sync.WaitGroup
	var first *httptest.ResponseRecorder
	wg.Go(func() { first = get(h, "/metrics") })
	select {
	case <-g.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the first scrape did not start")
	}
	for _, target := range []string{"/metrics", "/metrics?collect[]=idle", "/metrics?exclude[]=gate"} {
		if w := get(h, target); w.Code != http.StatusServiceUnavailable {
			t.Errorf("%s with one scrape in flight and --web.max-requests=1: %d, want 503", target, w.Code)
		}
	}
	close(g.open)
	wg.Wait()
	if first.Code != http.StatusOK {
		t.Fatalf("the first scrape: %d", first.Code)
	}
	body := get(h, "/metrics").Body.String()
	for _, series := range []string{
		`promhttp_metric_handler_requests_total{code="503"} 1`, // only unfiltered scrapes are counted
		`promhttp_metric_handler_requests_total{code="200"} 1`,
		`promhttp_metric_handler_requests_in_flight 1`,
	} {
		if !strings.Contains(body, series+"\n") {
			t.Errorf("no %s in:\n%s", series, body)
		}
	}
}

// The exporter's own metrics are in unfiltered and collect[] scrapes
// alike, and in neither with --web.disable-exporter-metrics.
func TestExporterMetricsInEveryScrape(t *testing.T) {
	exporter := collector.NewExporter(map[string]collector.Collector{"a": idle{}, "b": idle{}}, nil, log.NewNopLogger())
	for _, exporterMetrics := range []bool{true, false} {
		h := newMetricsHandler(exporter, exporterMetrics, 0, log.NewNopLogger())
		for _, target := range []string{"/metrics", "/metrics?collect[]=a"} {
			w := get(h, target)
			if w.Code != http.StatusOK {
				t.Fatalf("%s: %d", target, w.Code)
			}
			body := w.Body.String()
			for _, name := range []string{"process_cpu_seconds_total", "go_goroutines", "promhttp_metric_handler_errors_total"} {
				if strings.Contains(body, "\n"+name) != exporterMetrics {
					t.Errorf("exporter metrics %v, %s: %s present %v", exporterMetrics, target, name, !exporterMetrics)
				}
			}
			if !strings.Contains(body, `spark_scrape_collector_success{collector="a"} 1`) {
				t.Errorf("%s lacks collector a:\n%s", target, body)
			}
			if strings.Contains(body, `collector="b"`) == (target != "/metrics") {
				t.Errorf("%s: collector b present %v", target, target != "/metrics")
			}
		}
	}
}

// A client that accepts gzip gets gzip; one that does not, plain text.
func TestCompressedForClientsThatAcceptGzip(t *testing.T) {
	exporter := collector.NewExporter(map[string]collector.Collector{"a": idle{}}, nil, log.NewNopLogger())
	h := newMetricsHandler(exporter, true, 0, log.NewNopLogger())
	for _, target := range []string{"/metrics", "/metrics?collect[]=a"} {
		r := httptest.NewRequest(http.MethodGet, target, nil)
		r.Header.Set("Accept-Encoding", "gzip")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Header().Get("Content-Encoding") != "gzip" {
			t.Fatalf("%s: Content-Encoding %q, want gzip", target, w.Header().Get("Content-Encoding"))
		}
		zr, err := gzip.NewReader(w.Body)
		if err != nil {
			t.Fatal(err)
		}
		text, err := io.ReadAll(zr)
		if err != nil || !strings.Contains(string(text), "spark_scrape_collector_success") {
			t.Errorf("%s: %v, body:\n%s", target, err, text)
		}
		if plain := get(h, target); plain.Header().Get("Content-Encoding") != "" ||
			!strings.Contains(plain.Body.String(), "spark_scrape_collector_success") {
			t.Errorf("%s without Accept-Encoding: %q encoded", target, plain.Header().Get("Content-Encoding"))
		}
	}
}
