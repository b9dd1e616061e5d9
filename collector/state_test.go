package collector

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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
