package collector

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spark-exporter/spark_exporter/internal/collected"
)

// State is the values the collectors' latest metrics were rendered from, so
// that the status page cannot say other than the exposition. Read the parts,
// never change them.
func (e *Exporter) State() collected.State {
	st := e.results.Parts()
	for _, name := range e.Names() {
		h := e.health[name]
		h.mu.Lock()
		run := h.last
		h.mu.Unlock()
		run.Name = name
		st.Runs = append(st.Runs, run)
	}
	return st
}

// At is when the latest complete collection ended (State's At); zero
// before the first.
func (e *Exporter) At() time.Time { return e.results.Parts().At }

// Awaited: a consumer of the results waits for the first complete
// collection (collected.Results.AfterFirst).
func (e *Exporter) Awaited() bool { return e.results.Awaited() }

// Refresh runs every collector, as a scrape does, and drops the metrics:
// the parts State reads are then fresh.
func (e *Exporter) Refresh() {
	ch := make(chan prometheus.Metric, 256)
	done := make(chan struct{})
	go func() {
		for range ch {
		}
		close(done)
	}()
	e.Collect(ch)
	close(ch)
	<-done
}
