package report

import (
	"slices"
	"time"
)

// MaxListed bounds the throttle episodes a report lists, and the stretches
// of each alert and of contention: the first, the last and the longest
// between; the rest are counted, as a log's malformed lines are.
const MaxListed = 10

// listing keeps, of stretches added in time order, the first, the last
// and the MaxListed-2 longest between, holding no more than that.
type listing[T any] struct {
	length      func(T) time.Duration
	first, last T
	between     []T
	n           int
}

func (l *listing[T]) add(v T) {
	l.n++
	switch {
	case l.n == 1:
		l.first = v
		return
	case l.n > 2:
		l.between = append(l.between, l.last)
		if len(l.between) > MaxListed-2 {
			k := l.shortest()
			l.between = slices.Delete(l.between, k, k+1)
		}
	}
	l.last = v
}

// shortest is the index of the shortest stretch between, the latest of
// equals: of stretches alike, the earlier are listed.
func (l *listing[T]) shortest() int {
	k := 0
	for i, v := range l.between {
		if l.length(v) <= l.length(l.between[k]) {
			k = i
		}
	}
	return k
}

// list is what was kept, in time order, and how many were left out.
func (l *listing[T]) list() (kept []T, leftOut int) {
	kept = make([]T, 0, min(l.n, MaxListed))
	if l.n > 0 {
		kept = append(kept, l.first)
	}
	kept = append(kept, l.between...)
	if l.n > 1 {
		kept = append(kept, l.last)
	}
	return kept, l.n - len(kept)
}

// episodeLog is a run's episodes as the report lists them, and what the
// verdict reads of all of them.
type episodeLog struct {
	listing[Episode]
	evidence map[string]bool
	length   time.Duration // all the episodes'
}

func newEpisodeLog() *episodeLog {
	return &episodeLog{listing: listing[Episode]{length: Episode.length}, evidence: map[string]bool{}}
}

func (l *episodeLog) add(e Episode) {
	l.listing.add(e)
	l.evidence[e.Evidence] = true
	l.length += e.length()
}

func (e Episode) length() time.Duration { return e.End.Sub(e.Start) }

// spanListing keeps stretches of a Prometheus series.
func spanListing() *listing[Span] {
	return &listing[Span]{length: func(s Span) time.Duration { return s.End.Sub(s.Start) }}
}
