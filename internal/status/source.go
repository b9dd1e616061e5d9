package status

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/prometheus/common/version"

	"github.com/spark-exporter/spark_exporter/internal/collected"
)

// Collectors is the exporter as the status page sees it (collector.Exporter).
type Collectors interface {
	State() collected.State
	// At is State's At, without the rest.
	At() time.Time
	// Refresh runs every collector: a collection whose metrics the page drops.
	Refresh()
}

// Source makes the model from the collectors' latest results when they are
// younger than MaxAge, else from a run of the collectors that the viewers
// asking meanwhile share: a page open in several browsers so costs at most
// about one run per MaxAge, and none while Prometheus scrapes more often.
type Source struct {
	// MaxAge is how old a state may be shown; set it before the first request.
	MaxAge time.Duration

	collectors Collectors
	build      BuildInfo
	now        func() time.Time

	mu      sync.Mutex
	last    *Result
	pending *refresh // the run going now, nil when none
}

// Result is one model, and its JSON and View, each rendered once for every
// viewer when the first asks: a page's refresh needs only the View, the
// API only the JSON.
type Result struct {
	Model Model
	At    time.Time // the state's: when the collectors' run ended

	jsonOnce sync.Once
	body     []byte

	once     sync.Once
	viewed   View
	viewBody []byte
}

// jsonBody is the model as JSON; nil if it could not be encoded (a NaN, which
// buildModel leaves out): the API then answers an error rather than a body that
// breaks its schema.
func (r *Result) jsonBody() []byte {
	r.jsonOnce.Do(func() {
		if body, err := json.Marshal(r.Model); err == nil {
			r.body = body
		}
	})
	return r.body
}

func (r *Result) render() {
	r.once.Do(func() {
		r.viewed = newView(r.Model)
		// Texts and numbers as strings: Marshal cannot fail on them.
		r.viewBody, _ = json.Marshal(r.viewed)
	})
}

func (r *Result) view() View {
	r.render()
	return r.viewed
}

func (r *Result) viewJSON() []byte {
	r.render()
	return r.viewBody
}

type refresh struct {
	done chan struct{}
	res  *Result
}

// DefaultMaxAge is how old a state may be shown: shorter than any refresh
// interval a viewer uses, long enough that viewers refreshing together
// share one run of the collectors.
const DefaultMaxAge = time.Second

// NewSource makes models from c's state.
func NewSource(c Collectors) *Source {
	return &Source{collectors: c, MaxAge: DefaultMaxAge, now: time.Now,
		build: BuildInfo{Version: version.Version, Revision: version.GetRevision(), GoVersion: version.GoVersion}}
}

// get returns a model of the newest state, running the collectors when it
// is older than MaxAge; it returns early with ctx's error when ctx ends
// while they run (the run goes on for the others waiting).
func (s *Source) get(ctx context.Context) (*Result, error) {
	s.mu.Lock()
	// The model made last is shown again while it is fresh and no scrape
	// has rendered a newer state since.
	if s.last != nil && s.fresh(s.last.At) && !s.collectors.At().After(s.last.At) {
		r := s.last
		s.mu.Unlock()
		return r, nil
	}
	g := s.pending
	if g == nil {
		g = &refresh{done: make(chan struct{})}
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

func (s *Source) fresh(at time.Time) bool {
	return !at.IsZero() && s.now().Sub(at) < s.MaxAge
}

func (s *Source) run(g *refresh) {
	st := s.collectors.State()
	if !s.fresh(st.At) {
		// A collector's error does not fail the run: what was read is
		// shown, and each collector's success says which failed.
		s.collectors.Refresh()
		st = s.collectors.State()
	}
	g.res = &Result{Model: buildModel(s.build, st), At: st.At}
	s.mu.Lock()
	s.last, s.pending = g.res, nil
	s.mu.Unlock()
	close(g.done)
}
