package report

import (
	"slices"
	"time"
)

// maxListed: the first, the last and the longest between; the rest are counted.
const maxListed = 10

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
		if len(l.between) > maxListed-2 {
			k := l.shortest()
			l.between = slices.Delete(l.between, k, k+1)
		}
	}
	l.last = v
}

// shortest is the latest of equals: of stretches alike, the earlier are listed.
func (l *listing[T]) shortest() int {
	k := 0
	for i, v := range l.between {
		if l.length(v) <= l.length(l.between[k]) {
			k = i
		}
	}
	return k
}

func (l *listing[T]) list() (kept []T, leftOut int) {
	kept = make([]T, 0, min(l.n, maxListed))
	if l.n > 0 {
		kept = append(kept, l.first)
	}
	kept = append(kept, l.between...)
	if l.n > 1 {
		kept = append(kept, l.last)
	}
	return kept, l.n - len(kept)
}

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

func spanListing() *listing[Span] {
	return &listing[Span]{length: func(s Span) time.Duration { return s.End.Sub(s.Start) }}
}
