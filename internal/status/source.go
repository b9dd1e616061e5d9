package status

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Source makes the model from the exporter's registry, sharing one gather
// between the viewers who ask at about the same moment: a request that
// comes while a gather runs waits for it, and a model younger than MaxAge
// is served again. A page open in several browsers, each refreshing every
// few seconds, so costs about one scrape per refresh interval, and the
// gather reads NVML only as a scrape would (the gpu collector serves the
// thermal sampler's reading while it is recent).
type Source struct {
	// MaxAge is how long a model is served again (DefaultMaxAge); set it
	// before the first Get.
	MaxAge time.Duration

	gatherer prometheus.Gatherer
	thermal  func() (ThermalInput, bool)
	now      func() time.Time

	mu      sync.Mutex
	last    *Result
	pending *gather // the gather running now, nil when none
}

// Result is one model and its JSON.
type Result struct {
	Model Model
	JSON  []byte
	At    time.Time
}

type gather struct {
	done chan struct{}
	res  *Result
}

// DefaultMaxAge is how long a model is served again: shorter than any
// refresh interval a viewer uses, long enough that viewers refreshing
// together share one gather.
const DefaultMaxAge = time.Second

// NewSource makes models from g, the registry /metrics gathers, and from
// thermal, the thermal sampler's snapshot and configuration (false when the
// thermal collector is off; nil thermal: never).
func NewSource(g prometheus.Gatherer, thermal func() (ThermalInput, bool)) *Source {
	return &Source{gatherer: g, thermal: thermal, MaxAge: DefaultMaxAge, now: time.Now}
}

// Get returns a model at most MaxAge old, gathering when there is none; it
// returns early with ctx's error when ctx ends while a gather runs (the
// gather goes on for the others waiting).
func (s *Source) Get(ctx context.Context) (*Result, error) {
	s.mu.Lock()
	if s.last != nil && s.now().Sub(s.last.At) < s.MaxAge {
		r := s.last
		s.mu.Unlock()
		return r, nil
	}
	g := s.pending
	if g == nil {
		g = &gather{done: make(chan struct{})}
		s.pending = g
		go s.run(g)
	}
	s.mu.Unlock()
	select {
	case <-g.done:
		return g.res, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (s *Source) run(g *gather) {
	// A collector's error does not fail the gather: what was gathered is
	// shown, and spark_scrape_collector_success says which failed.
	families, _ := s.gatherer.Gather()
	var th *ThermalInput
	if s.thermal != nil {
		if in, ok := s.thermal(); ok {
			th = &in
		}
	}
	now := s.now()
	model := Build(families, th, now)
	body, err := json.Marshal(model)
	if err != nil {
		// A model is plain values; only a NaN or an infinity could
		// refuse, and Build leaves those out. Should one come, the API
		// answers 500 rather than a body that breaks its schema.
		body = nil
	}
	g.res = &Result{Model: model, JSON: body, At: now}
	s.mu.Lock()
	s.last, s.pending = g.res, nil
	s.mu.Unlock()
	close(g.done)
}
