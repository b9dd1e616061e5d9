package collector

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// reads is a refresher: refresh counts its reads, and Update, which a
// refresh must not call, fails the test.
type reads struct {
	t     *testing.T
	n     int
	err   error
	scrap bool
}

func (r *reads) refresh(context.Context) error { r.n++; return r.err }

func (r *reads) Update(context.Context, chan<- prometheus.Metric) error {
	if !r.scrap {
		r.t.Error("Update called by a refresh: metrics built only to be dropped")
	}
	return r.refresh(context.Background())
}

// A refresh reads each collector once, builds no metric of a refresher,
// records its success as a scrape would, and is a complete collection.
func TestRefreshReadsWithoutMetrics(t *testing.T) {
	ok, failing := &reads{t: t}, &reads{t: t, err: errors.New("boom")}
	e := NewExporter(map[string]Collector{"ok": ok, "failing": failing, "plain": &fake{}}, nopLogger())
	e.Refresh()
	if ok.n != 1 || failing.n != 1 {
		t.Errorf("reads %d and %d, want one each", ok.n, failing.n)
	}
	if e.At().IsZero() {
		t.Error("a refresh is not counted as a complete collection")
	}
	success := map[string]bool{}
	for _, r := range e.State().Runs {
		success[r.Name] = r.Success
	}
	if len(success) != 3 || success["failing"] || !success["ok"] || !success["plain"] {
		t.Errorf("runs %v, want failing false, ok and plain true", success)
	}
}

// Complete is every collector: a scrape, a collect[] that names every
// collector, and a refresh count as fresh for the status page; a collect[]
// that leaves one out does not move At.
func TestCompleteCollection(t *testing.T) {
	e := NewExporter(map[string]Collector{"a": &reads{t: t, scrap: true}, "b": &reads{t: t, scrap: true}}, nopLogger())
	scrape := func(include []string) time.Time {
		t.Helper()
		f, err := e.Filter(include, nil)
		if err != nil {
			t.Fatal(err)
		}
		gatherAll(t, f)
		return e.At()
	}
	if at := scrape([]string{"a"}); !at.IsZero() {
		t.Errorf("collect[]=a moved At to %v: b did not run", at)
	}
	first := scrape([]string{"a", "b"})
	if first.IsZero() {
		t.Fatal("a collect[] naming every collector is not complete")
	}
	if at := scrape([]string{"b"}); !at.Equal(first) {
		t.Errorf("collect[]=b moved At from %v to %v", first, at)
	}
	if at := scrape(nil); at.Before(first) {
		t.Errorf("a whole scrape moved At back from %v to %v", first, at)
	}
}

// Every collector reads for a refresh without building metrics: none
// falls back to Update.
func TestEveryCollectorRefreshes(t *testing.T) {
	types := map[string]Collector{
		"engines": (*enginesCollector)(nil), "fabric": (*fabricCollector)(nil), "flight": (*flightCollector)(nil),
		"gpu": (*gpuCollector)(nil), "kernel": (*kernelCollector)(nil), "plan": (*planCollector)(nil),
		"platform": (*platformCollector)(nil), "pool": (*poolCollector)(nil), "thermal": (*thermalCollector)(nil),
		"workloads": (*workloadsCollector)(nil), "journal": (*journalCollector)(nil),
	}
	// Its Update reads nothing, only its reader's counts: Update is its refresh.
	updateOnly := map[string]bool{"journal": true}
	for _, r := range registrations {
		c, ok := types[r.name]
		if !ok {
			t.Errorf("collector %s: add its type here", r.name)
			continue
		}
		if _, ok := c.(refresher); !ok && !updateOnly[r.name] {
			t.Errorf("collector %s is not a refresher: a status refresh would build its metrics to drop them", r.name)
		}
	}
}
