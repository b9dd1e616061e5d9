package collector

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spark-exporter/spark_exporter/internal/collected"
)

// publisher is a collector whose latest result the status page shows.
type publisher interface {
	// publish sets the collector's part of st to what its latest Update
	// rendered or refresh read. The part is shared, not copied.
	publish(st *collected.State)
}

// refresher is a collector that can read its source without rendering it:
// a status refresh then builds no metric only to drop it.
type refresher interface {
	// refresh reads what Update reads, for publish; its ctx and error are
	// as Update's.
	refresh(ctx context.Context) error
}

// State is the values the collectors' latest metrics were rendered from, so
// that the status page cannot say other than the exposition. Read the parts,
// never change them.
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
		if p, ok := e.collectors[name].(publisher); ok {
			p.publish(&st)
		}
	}
	return st
}

// At is when the latest complete collection ended (State's At); zero
// before the first.
func (e *Exporter) At() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.at
}

// Refresh runs every collector for the status page; one that is not a
// refresher runs Update into a drained channel.
func (e *Exporter) Refresh() {
	var wg sync.WaitGroup
	for _, name := range e.Names() {
		wg.Go(func() {
			e.timed(name, func(ctx context.Context) error { return refresh(ctx, e.collectors[name]) })
		})
	}
	wg.Wait()
	e.complete()
}

func refresh(ctx context.Context, c Collector) error {
	if r, ok := c.(refresher); ok {
		return r.refresh(ctx)
	}
	ch := make(chan prometheus.Metric, 64)
	go func() {
		for range ch {
		}
	}()
	defer close(ch)
	return c.Update(ctx, ch)
}

func (e *Exporter) complete() {
	e.mu.Lock()
	e.at = time.Now()
	e.mu.Unlock()
}
