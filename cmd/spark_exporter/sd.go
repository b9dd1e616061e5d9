package main

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/spark-exporter/spark_exporter/collector"
)

// sdPath serves the inference engines found as Prometheus HTTP service
// discovery (http_sd_configs), for scraping each engine's own /metrics.
const sdPath = "/sd/engines"

// sdGroup is one target group of the http_sd format
// (prometheus.io/docs/prometheus/latest/http_sd/).
type sdGroup struct {
	Targets []string          `json:"targets"`
	Labels  map[string]string `json:"labels"`
}

// engineSD lists each engine the exporter asks with its kind, pid and
// container. Ollama is listed too, though it serves no Prometheus metrics:
// a scrape configuration keeps kinds by the kind label. The addresses are on
// loopback; a Prometheus on another machine takes the host from the SD URL
// (__meta_url) by relabelling. examples/prometheus.yml shows both.
func engineSD(exporter *collector.Exporter) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		groups := []sdGroup{}
		for _, t := range exporter.EngineTargets() {
			labels := map[string]string{"kind": t.Kind, "container": t.Container}
			if t.PID != 0 {
				labels["pid"] = strconv.Itoa(t.PID)
			}
			groups = append(groups, sdGroup{Targets: []string{t.Address}, Labels: labels})
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(groups)
	})
}
