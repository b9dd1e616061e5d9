// Command memfloor is the least program built on the libraries
// spark_exporter must use: kingpin flags, exporter-toolkit's web server,
// client_golang's Go and process metrics, and cgo (go-nvml needs it), with
// nothing of the exporter's own. The load tests measure its resident memory
// beside the exporter's (TestLoadMemoryOverManyScrapes,
// docs/performance.md): what the libraries alone cost, the floor no
// exporter built on them goes under.
package main

import (
	"log/slog"
	"net/http"
	"os"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/exporter-toolkit/web"
	"github.com/prometheus/exporter-toolkit/web/kingpinflag"
)

// A cgo program, as go-nvml makes the exporter one: linked to libc, loaded
// by the dynamic loader, both of whose pages it maps.

import "C"

func main() {
	flags := kingpinflag.AddFlags(kingpin.CommandLine, "127.0.0.1:0")
	kingpin.Parse()
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	http.Handle("/metrics", promhttp.HandlerFor(registry, promhttp.HandlerOpts{}))
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := web.ListenAndServe(&http.Server{}, flags, logger); err != nil {
		logger.Error("serving", "err", err)
		os.Exit(1)
	}
}
