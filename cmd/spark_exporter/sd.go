package main

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/spark-exporter/spark_exporter/collector"
)

// sdPath serves the engines found as Prometheus HTTP service discovery.
const sdPath = "/sd/engines"

type sdGroup struct {
	Targets []string          `json:"targets"`
	Labels  map[string]string `json:"labels"`
}

// engineSD lists the engines the engines collector asked at its latest
// round, Ollama too, though it serves no Prometheus metrics: a scrape
// configuration keeps kinds by the kind label (examples/prometheus.yml).
func engineSD(exporter *collector.Exporter) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		groups := []sdGroup{}
		for _, t := range exporter.State().EngineTargets {
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
