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
	"sort"
	"strings"
	"sync"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/spark-exporter/spark_exporter/internal/testexporter"
)

// builtins are series Prometheus itself writes: alert state and scrape health.
var builtins = map[string]bool{"ALERTS": true, "ALERTS_FOR_STATE": true, "up": true}

// Result is what the parser made of one expression.
type Result struct {
	Metrics []string `json:"metrics"`
	Error   string   `json:"error"`
}

var (
	helperOnce sync.Once
	helper     string
	helperErr  error
)

// Parse parses every expression with Prometheus' parser and returns, in
// order, the metric names each one selects or its parse error.
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
	Exported map[string]bool
	Recorded map[string]bool
}

// LoadKnown reads testdata/golden/*.metrics and rules/*.yml.
func LoadKnown(t testing.TB) Known {
	t.Helper()
	root := testexporter.Root(t)
	k := Known{Exported: map[string]bool{}, Recorded: map[string]bool{}}
	goldens, err := filepath.Glob(filepath.Join(root, "testdata", "golden", "*.metrics"))
	if err != nil || len(goldens) == 0 {
		t.Fatalf("no golden files in testdata/golden (%v)", err)
	}
	for _, path := range goldens {
		names, err := ExportedNames(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			k.Exported[n] = true
		}
	}
	names, err := RecordedNames(filepath.Join(root, "rules"))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		k.Recorded[n] = true
	}
	return k
}

// Why says why name may be used ("" when it may not).
func (k Known) Why(name string) string {
	switch {
	case k.Exported[name]:
		return "exported"
	case k.Recorded[name]:
		return "recorded"
	case builtins[name]:
		return "prometheus"
	}
	return ""
}

// ExportedNames lists the metric names of a text-format /metrics file.
func ExportedNames(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			seen[line[:i]] = true
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	return sorted(seen), nil
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
