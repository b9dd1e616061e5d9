package collector

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spark-exporter/spark_exporter/internal/collected"
	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
)

// counted counts its Updates.
type counted struct{ n int }

func (c *counted) Update(context.Context, chan<- prometheus.Metric) error { c.n++; return nil }

// Complete is every collector: a scrape and a collect[] that names every
// collector count as fresh for the status page; a collect[] that leaves one
// out does not move At.
func TestCompleteCollection(t *testing.T) {
	e := NewExporter(map[string]Collector{"a": &counted{}, "b": &counted{}}, nil, nopLogger())
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

// The one contract: collector/ declares no interface but Collector and
// NVML, so that no hook is found by type assertion.
func TestOneCollectorContract(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if ts, ok := n.(*ast.TypeSpec); ok {
				if _, ok := ts.Type.(*ast.InterfaceType); ok && ts.Name.Name != "Collector" && ts.Name.Name != "NVML" {
					t.Errorf("%s declares interface %s", fset.Position(ts.Pos()), ts.Name.Name)
				}
			}
			return true
		})
	}
}

// A run that fails stores no part: the views never show a reading older
// than the collector's latest run.
func TestFailedRunStoresNoPart(t *testing.T) {
	proc := testexporter.CopyTree(t, fixtures)
	pool := mustPool(t, proc)
	sys := t.TempDir()
	if err := os.CopyFS(sys, os.DirFS(sysFixture("spark-fabric"))); err != nil {
		t.Fatal(err)
	}
	fabric := newFabricCollector(sys, nopLogger())
	state := filepath.Join(sys, "class/infiniband/rocep1s0f0/ports/1/state")
	for _, tc := range []struct {
		name  string
		c     Collector
		set   func(*collected.Results)
		part  func(collected.State) bool
		spoil func(t *testing.T)
	}{
		{"pool", pool, func(r *collected.Results) { pool.results = r }, func(st collected.State) bool { return st.Pool != nil },
			func(t *testing.T) {
				if err := os.Remove(filepath.Join(proc, "meminfo")); err != nil {
					t.Fatal(err)
				}
			}},
		{"fabric", fabric, func(r *collected.Results) { fabric.results = r }, func(st collected.State) bool { return st.Fabric != nil },
			func(t *testing.T) {
				// A read that blocks, released at the end.
				if err := os.Remove(state); err != nil {
					t.Fatal(err)
				}
				if err := syscall.Mkfifo(state, 0o644); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() {
					if w, err := os.OpenFile(state, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
						w.Close()
					}
				})
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			results := &collected.Results{}
			tc.set(results)
			if _, err := collectWithin(t, tc.c, 50*time.Millisecond); err != nil || !tc.part(results.Parts()) {
				t.Fatalf("a good run: %v, part stored %v", err, tc.part(results.Parts()))
			}
			tc.spoil(t)
			if _, err := collectWithin(t, tc.c, 50*time.Millisecond); err == nil {
				t.Fatal("the broken run succeeded")
			}
			if tc.part(results.Parts()) {
				t.Error("a failed run left the previous part in place")
			}
		})
	}
}
