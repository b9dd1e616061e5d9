// Package docs_test checks docs/metrics.md, the metric reference, against
// what the exporter really exports: the golden files the end-to-end tests
// compare the built binary's /metrics with (testdata/golden/*.metrics).
package docs_test

import (
	"bufio"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const (
	metricsDoc   = "metrics.md"
	goldenGlob   = "../testdata/golden/*.metrics"
	listStart    = "<!-- not-in-fixtures"
	listEnd      = "<!-- end not-in-fixtures -->"
	metricPrefix = "spark_"
	// The program's name shares the prefix and is no metric.
	programName = "spark_exporter"
)

// goldenMetric is what the golden files say of one metric.
type goldenMetric struct {
	typ    string          // from # TYPE
	labels map[string]bool // every label name on any of its series
	file   string          // the first golden file it is in
}

// readGolden collects every spark_* metric of every golden file.
func readGolden(t *testing.T) map[string]*goldenMetric {
	t.Helper()
	files, err := filepath.Glob(goldenGlob)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no golden files match %s", goldenGlob)
	}
	out := map[string]*goldenMetric{}
	get := func(name, file string) *goldenMetric {
		m := out[name]
		if m == nil {
			m = &goldenMetric{labels: map[string]bool{}, file: filepath.Base(file)}
			out[name] = m
		}
		return m
	}
	for _, file := range files {
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
				name, typ, _ := strings.Cut(rest, " ")
				if strings.HasPrefix(name, metricPrefix) {
					get(name, file).typ = typ
				}
				continue
			}
			if line == "" || strings.HasPrefix(line, "#") || !strings.HasPrefix(line, metricPrefix) {
				continue
			}
			name, labels := splitSeries(line)
			m := get(name, file)
			for _, l := range labels {
				m.labels[l] = true
			}
		}
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
	}
	if len(out) == 0 {
		t.Fatalf("no %s* metrics in %s", metricPrefix, goldenGlob)
	}
	return out
}

var labelName = regexp.MustCompile(`(?:^|,)([a-zA-Z_][a-zA-Z0-9_]*)=`)

// splitSeries returns a series line's metric name and label names. A
// placeholder the golden tests substitute (spark_exporter_build_info{<build>})
// gives no label names.
func splitSeries(line string) (string, []string) {
	end := strings.IndexAny(line, "{ ")
	if end < 0 {
		return line, nil
	}
	name := line[:end]
	if line[end] != '{' {
		return name, nil
	}
	closing := strings.LastIndex(line, "}")
	if closing < end {
		return name, nil
	}
	var labels []string
	for _, m := range labelName.FindAllStringSubmatch(line[end+1:closing], -1) {
		labels = append(labels, m[1])
	}
	return name, labels
}

// docRow is one metric row of a table in metrics.md: | `name` | type | labels | meaning |.
type docRow struct {
	typ    string
	labels []string
}

var (
	// A metric row's first cell: the name alone, in backquotes.
	rowName = regexp.MustCompile("^\\| `(spark_[a-z0-9_]+)` \\|")
	// Any spark_* name in the text, to catch names mentioned in prose.
	anyName = regexp.MustCompile(`spark_[a-z0-9_]*`)
	// A label cell: a name, optionally followed by its values in parentheses.
	labelCell = regexp.MustCompile(`^([a-z_]+)(?: \(.*\))?$`)
)

type doc struct {
	rows          map[string]docRow
	mentioned     map[string]bool // every complete spark_* name anywhere in the page
	notInFixtures map[string]bool
}

func readDoc(t *testing.T) doc {
	t.Helper()
	data, err := os.ReadFile(metricsDoc)
	if err != nil {
		t.Fatal(err)
	}
	d := doc{rows: map[string]docRow{}, mentioned: map[string]bool{}, notInFixtures: map[string]bool{}}
	inList := false
	for i, line := range strings.Split(string(data), "\n") {
		switch {
		case strings.HasPrefix(line, listStart):
			inList = true
		case strings.HasPrefix(line, listEnd):
			inList = false
		case inList && strings.HasPrefix(line, "- `"):
			name, _, _ := strings.Cut(strings.TrimPrefix(line, "- `"), "`")
			d.notInFixtures[name] = true
		}
		if m := rowName.FindStringSubmatch(line); m != nil {
			cells := strings.Split(strings.Trim(line, "|"), "|")
			if len(cells) != 4 {
				t.Errorf("%s:%d: metric row of %d cells, want 4 (metric, type, labels, meaning)", metricsDoc, i+1, len(cells))
				continue
			}
			if _, dup := d.rows[m[1]]; dup {
				t.Errorf("%s:%d: %s has a second row", metricsDoc, i+1, m[1])
			}
			d.rows[m[1]] = docRow{typ: strings.TrimSpace(cells[1]), labels: parseLabels(t, i+1, cells[2])}
		}
		for _, loc := range anyName.FindAllStringIndex(line, -1) {
			name := line[loc[0]:loc[1]]
			before := byte(' ')
			if loc[0] > 0 {
				before = line[loc[0]-1]
			}
			after := byte(' ')
			if loc[1] < len(line) {
				after = line[loc[1]]
			}
			// Skip a wildcard (spark_gpu_memory_*) and a name inside
			// another (a recording rule's instance:spark_…:rate5m).
			if after == '*' || strings.HasSuffix(name, "_") || before == ':' || isIdent(before) || name == programName {
				continue
			}
			d.mentioned[name] = true
		}
	}
	if inList {
		t.Fatalf("%s: %q without %q", metricsDoc, listStart, listEnd)
	}
	if len(d.rows) == 0 {
		t.Fatalf("%s: no metric rows", metricsDoc)
	}
	return d
}

func isIdent(b byte) bool {
	return b == '_' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
}

func parseLabels(t *testing.T, line int, cell string) []string {
	cell = strings.TrimSpace(cell)
	if cell == "—" {
		return nil
	}
	var out []string
	for _, part := range splitOutsideParens(cell) {
		m := labelCell.FindStringSubmatch(strings.TrimSpace(part))
		if m == nil {
			t.Errorf("%s:%d: label cell %q: want names separated by commas, each optionally followed by its values in parentheses, or —", metricsDoc, line, cell)
			return nil
		}
		out = append(out, m[1])
	}
	return out
}

func splitOutsideParens(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, r := range s {
		switch r {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

// Every metric the exporter exports on the fixtures has a row, with the
// type and every label the golden files show.
func TestMetricsDocCoversEveryGoldenMetric(t *testing.T) {
	golden, d := readGolden(t), readDoc(t)
	for _, name := range slices.Sorted(maps.Keys(golden)) {
		g := golden[name]
		row, ok := d.rows[name]
		if !ok {
			t.Errorf("%s (in %s) has no row in %s", name, g.file, metricsDoc)
			continue
		}
		if row.typ != g.typ {
			t.Errorf("%s: %s says type %q, %s says %q", name, metricsDoc, row.typ, g.file, g.typ)
		}
		for _, l := range slices.Sorted(maps.Keys(g.labels)) {
			if !slices.Contains(row.labels, l) {
				t.Errorf("%s: label %q of the golden files is not in %s's labels %v", name, l, metricsDoc, row.labels)
			}
		}
		for _, l := range row.labels {
			if len(g.labels) > 0 && !g.labels[l] {
				t.Errorf("%s: %s lists label %q, which no golden series carries", name, metricsDoc, l)
			}
		}
	}
}

// Every name the page mentions is exported on the fixtures, or listed as
// one they cannot show: a misspelt or removed metric fails here.
func TestMetricsDocNamesAreExported(t *testing.T) {
	golden, d := readGolden(t), readDoc(t)
	for _, name := range slices.Sorted(maps.Keys(d.mentioned)) {
		if golden[name] == nil && !d.notInFixtures[name] {
			t.Errorf("%s names %s, which is in no golden file and not in its not-in-fixtures list", metricsDoc, name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(d.notInFixtures)) {
		if g := golden[name]; g != nil {
			t.Errorf("%s is listed as not in the fixtures, but %s has it: take it off the list", name, g.file)
		}
		if _, ok := d.rows[name]; !ok {
			t.Errorf("%s is in the not-in-fixtures list but has no row", name)
		}
	}
}
