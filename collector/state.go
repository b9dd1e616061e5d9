package collector

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spark-exporter/spark_exporter/internal/collected"
)

// keeper is a collector that keeps the typed result its latest Update
// rendered, and adds it to a State.
type keeper interface {
	keep(st *collected.State)
}

// State is what the collectors found at their latest run, typed: the values
// their metrics were rendered from, for the views beside /metrics (the
// status page), which so cannot say other than the exposition. The parts
// are shared, not copied: read them, never change them.
func (e *Exporter) State() collected.State {
	e.mu.Lock()
	st := collected.State{At: e.at}
	e.mu.Unlock()
	for _, name := range e.Names() {
		h := e.health[name]
		h.mu.Lock()
		run := h.last
		h.mu.Unlock()
		run.Name = name
		st.Runs = append(st.Runs, run)
		if k, ok := e.collectors[name].(keeper); ok {
			k.keep(&st)
		}
	}
	return st
}

// At is when the latest run of every collector together ended (State's
// At); zero before the first.
func (e *Exporter) At() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.at
}

// Refresh runs every collector as a scrape does, its metrics discarded: for
// a view that finds State older than it may show.
func (e *Exporter) Refresh() {
	ch := make(chan prometheus.Metric, 64)
	done := make(chan struct{})
	go func() {
		for range ch {
		}
		close(done)
	}()
	e.collect(ch, e.Names())
	close(ch)
	<-done
}
