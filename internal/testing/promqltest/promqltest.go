// Package promqltest checks PromQL written in the repository (dashboard
// queries, example configurations) against what the exporter really exports
// and what the shipped rules record. Parsing is Prometheus' own, through the
// tools/prometheus/promqlnames helper, so the exporter's go.mod stays free of
// github.com/prometheus/prometheus.
package promqltest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
)

// builtins are series Prometheus itself writes: alert state and scrape health.
var builtins = map[string]bool{"ALERTS": true, "ALERTS_FOR_STATE": true, "up": true}

// Result is what the parser made of one expression.
type Result struct {
	Metrics    []string    `json:"metrics"`
	Selectors  []Selector  `json:"selectors"`
	Thresholds []Threshold `json:"thresholds"`
	Error      string      `json:"error"`
}

// Threshold is one comparison of an expression with a number, the
// expression on the left: Expr is its PromQL text as Prometheus prints it,
// Op the operator, Value the number (constant arithmetic evaluated).
type Threshold struct {
	Expr  string  `json:"expr"`
	Op    string  `json:"op"`
	Value float64 `json:"value"`
}

// Selector is one vector selector: a metric name and its label matchers,
// the name's own matcher left out.
type Selector struct {
	Name     string    `json:"name"`
	Matchers []Matcher `json:"matchers"`
}

// Matcher is a label matcher; Op is =, !=, =~ or !~.
type Matcher struct {
	Label string `json:"label"`
	Op    string `json:"op"`
	Value string `json:"value"`
}

var (
	helperOnce sync.Once
	helper     string
	helperErr  error
)

// Parse parses every expression with Prometheus' parser and returns, in
// order, the metric names each one selects and the numbers it compares
// with, or its parse error.
func Parse(t testing.TB, exprs []string) []Result {
	t.Helper()
	root := testexporter.Root(t)
	helperOnce.Do(func() {
		dir, err := os.MkdirTemp("", "promqlnames-")
		if err != nil {
			helperErr = err
			return
		}
		helper = filepath.Join(dir, "promqlnames")
		cmd := exec.Command("go", "build", "-o", helper, "./promqlnames")
		cmd.Dir = filepath.Join(root, "tools", "prometheus")
		// The same settings as the Makefile's tools build, so the
		// Prometheus packages come from the build cache.
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			helperErr = fmt.Errorf("building tools/prometheus/promqlnames: %v\n%s", err, out)
		}
	})
	if helperErr != nil {
		t.Fatal(helperErr)
	}
	in, err := json.Marshal(exprs)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(helper)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("promqlnames: %v\n%s", err, stderr.String())
	}
	var results []Result
	if err := json.Unmarshal(out, &results); err != nil {
		t.Fatalf("promqlnames output: %v", err)
	}
	if len(results) != len(exprs) {
		t.Fatalf("promqlnames answered %d results for %d expressions", len(results), len(exprs))
	}
	return results
}

// Known is the set of metric names a query may use: those in the golden
// /metrics files, those recorded by rules/*.yml, and Prometheus' own series.
type Known struct {
	Exported Series
	Recorded map[string]bool
}

// LoadKnown reads testdata/golden/*.metrics and rules/*.yml.
func LoadKnown(t testing.TB) Known {
	t.Helper()
	names, err := RecordedNames(filepath.Join(testexporter.Root(t), "rules"))
	if err != nil {
		t.Fatal(err)
	}
	k := Known{Exported: LoadSeries(t), Recorded: map[string]bool{}}
	for _, n := range names {
		k.Recorded[n] = true
	}
	return k
}

// targetLabels are added by Prometheus from the scrape target: the exporter
// never exports them, queries may still match on them.
var targetLabels = map[string]bool{"instance": true, "job": true}

// AnyValue stands for a label value known only when the query runs (an
// alert's label in an annotation template): any value matches it.
const AnyValue = "{{ any value }}"

// Check says what is wrong with a selector: a metric that nothing exports
// or records, or a label (or, for =, a label value) the metric never has.
// Regular expressions are not checked.
func (k Known) Check(sel Selector) error {
	if k.Recorded[sel.Name] || builtins[sel.Name] {
		return nil
	}
	labels, ok := k.Exported[sel.Name]
	if !ok {
		return fmt.Errorf("metric %s is neither exported (testdata/golden) nor recorded by a rule", sel.Name)
	}
	for _, m := range sel.Matchers {
		if targetLabels[m.Label] {
			continue
		}
		values, ok := labels[m.Label]
		if !ok {
			return fmt.Errorf("metric %s has no label %q", sel.Name, m.Label)
		}
		if m.Op == "=" && m.Value != AnyValue && !values[m.Value] {
			return fmt.Errorf("metric %s never has %s=%q (seen: %s)", sel.Name, m.Label, m.Value, strings.Join(sorted(values), ", "))
		}
	}
	return nil
}

// Series is what the exporter exports: metric name → label name → the
// values seen.
type Series map[string]map[string]map[string]bool

// LoadSeries reads every testdata/golden/*.metrics file.
func LoadSeries(t testing.TB) Series {
	t.Helper()
	goldens, err := filepath.Glob(filepath.Join(testexporter.Root(t), "testdata", "golden", "*.metrics"))
	if err != nil || len(goldens) == 0 {
		t.Fatalf("no golden files in testdata/golden (%v)", err)
	}
	series := Series{}
	for _, path := range goldens {
		if err := series.read(path); err != nil {
			t.Fatal(err)
		}
	}
	return series
}

// A label pair of the text exposition format.
var labelPair = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

// read adds the series of a text-format /metrics file.
func (s Series) read(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.IndexAny(line, "{ ")
		if i <= 0 {
			continue
		}
		name := line[:i]
		if s[name] == nil {
			s[name] = map[string]map[string]bool{}
		}
		if line[i] != '{' {
			continue
		}
		labels, _, _ := strings.Cut(line[i+1:], "} ")
		for _, m := range labelPair.FindAllStringSubmatch(labels, -1) {
			if s[name][m[1]] == nil {
				s[name][m[1]] = map[string]bool{}
			}
			s[name][m[1]][m[2]] = true
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	return nil
}

// RuleFile is the part of a Prometheus rule file these checks read.
type RuleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Record string `yaml:"record"`
			Alert  string `yaml:"alert"`
			Expr   string `yaml:"expr"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// RecordedNames lists the names recorded by the rule files (*.yml) in dir; a
// missing dir records nothing.
func RecordedNames(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yml"))
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, path := range files {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		var rf RuleFile
		if err := yaml.Unmarshal(data, &rf); err != nil {
			return nil, fmt.Errorf("rules/%s: %w", filepath.Base(path), err)
		}
		for _, g := range rf.Groups {
			for _, r := range g.Rules {
				if r.Record != "" {
					seen[r.Record] = true
				}
			}
		}
	}
	return sorted(seen), nil
}

func sorted(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}
