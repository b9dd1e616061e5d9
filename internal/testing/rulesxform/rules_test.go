package rulesxform

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
)

func TestShortenDuration(t *testing.T) {
	for _, tc := range []struct {
		in     string
		factor int
		want   string
		err    string
	}{
		{"10m", 60, "10s", ""},
		{"5m", 60, "5s", ""},
		{"30s", 60, "500ms", ""},
		{"7d", 60, "2h48m", ""},
		{"1h30m", 60, "1m30s", ""},
		{"0s", 60, "0s", ""},
		{"0", 60, "0s", ""},
		{"90s", 1, "90s", ""}, // factor 1 keeps the text as written
		{"10m", 2, "5m", ""},
		{"1s", 60, "", "whole number of milliseconds"},
		{"1ms", 2, "", "whole number of milliseconds"},
		{"5x", 60, "", "unknown unit"},
		{"", 60, "", "empty duration"},
		{"-5m", 60, "", "not a valid duration"},
		{"5m", 0, "", "want 1 or more"},
	} {
		got, err := ShortenDuration(tc.in, tc.factor)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ShortenDuration(%q, %d) = %q, %v; want an error with %q", tc.in, tc.factor, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ShortenDuration(%q, %d) = %q, %v; want %q", tc.in, tc.factor, got, err, tc.want)
		}
	}
}

func TestShortenExpr(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
		changes        int
	}{
		{"range", `rate(x[5m])`, `rate(x[5s])`, 1},
		{"two ranges", `max_over_time(x[10m]) - min_over_time(x[10m])`, `max_over_time(x[10s]) - min_over_time(x[10s])`, 2},
		{"spaces kept", `rate(x[ 5m ])`, `rate(x[ 5s ])`, 1},
		{"subquery", `max_over_time(rate(x[5m])[1h:1m])`, `max_over_time(rate(x[5s])[1m:1s])`, 3},
		{"subquery, default step", `max_over_time(rate(x[5m])[1h:])`, `max_over_time(rate(x[5s])[1m:])`, 2},
		{"offset", `x offset 1h`, `x offset 1m`, 1},
		{"negative offset", `x offset -10m`, `x offset -10s`, 1},
		{"OFFSET in capitals", `rate(x[5m] OFFSET 10m)`, `rate(x[5s] OFFSET 10s)`, 2},
		{"a label named offset", `x{offset="1h"}`, `x{offset="1h"}`, 0},
		{"a metric named offset", `offset + 1`, `offset + 1`, 0},
		{"recording rule name", `instance:x:rate5m > 0.05`, `instance:x:rate5m > 0.05`, 0},
		{"brackets in strings", `x{re=~"[0-9]+"} and y{a='[5m]'} and z{b=` + "`[5m]`" + `}`, `x{re=~"[0-9]+"} and y{a='[5m]'} and z{b=` + "`[5m]`" + `}`, 0},
		{"escaped quote", `x{a="\"[5m]"}[5m]`, `x{a="\"[5m]"}[5s]`, 1},
		{"comment", "rate(x[5m]) # over [10m]\n> 0", "rate(x[5s]) # over [10m]\n> 0", 1},
		{"multi-line", "spark_plan_required_bytes\n> ignoring (plan) group_left\nspark_pool_headroom_after_flush_bytes\n", "spark_plan_required_bytes\n> ignoring (plan) group_left\nspark_pool_headroom_after_flush_bytes\n", 0},
		{"numbers untouched", `x >= 4 * 1024^3 and y < 1e3`, `x >= 4 * 1024^3 and y < 1e3`, 0},
	} {
		got, changes, err := ShortenExpr(tc.in, 60)
		if err != nil || got != tc.want || len(changes) != tc.changes {
			t.Errorf("%s: ShortenExpr(%q) = %q, %d changes, %v; want %q, %d changes", tc.name, tc.in, got, len(changes), err, tc.want, tc.changes)
		}
	}
}

func TestShortenExprErrors(t *testing.T) {
	for _, tc := range []struct{ in, err string }{
		{`rate(x[5m)`, "unclosed ["},
		{`rate(x[$__rate_interval])`, "not a valid duration"},
		{`rate(x[])`, "empty duration"},
		{`x[1h:1m:1s]`, "neither a range nor a subquery"},
		{`rate(x[1s])`, "whole number of milliseconds"},
		{`x offset 1s`, "offset"},
		{`x{a="[5m]}`, "unclosed string"},
	} {
		if got, _, err := ShortenExpr(tc.in, 60); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("ShortenExpr(%q) = %q, %v; want an error with %q", tc.in, got, err, tc.err)
		}
	}
}

const sample = `# Comments stay.
groups:
  - name: g
    interval: 1m
    rules:
      - record: r:x:rate5m
        expr: rate(x[5m])
      - alert: A
        expr: |
          r:x:rate5m > 0
          and max_over_time(y[7d]) == 1
        for: 10m
        keep_firing_for: 2m
        labels:
          severity: warning
        annotations:
          description: held for 10m over [5m]
  - name: empty
`

func TestShorten(t *testing.T) {
	out, changes, err := Shorten([]byte(sample), 60)
	if err != nil {
		t.Fatal(err)
	}
	want := []Change{
		{"g", "", "interval", "1m", "1s", 0},
		{"g", "r:x:rate5m", "expr", "5m", "5s", 7},
		{"g", "A", "for", "10m", "10s", 0},
		{"g", "A", "keep_firing_for", "2m", "2s", 0},
		{"g", "A", "expr", "7d", "2h48m", 35},
	}
	if !reflect.DeepEqual(changes, want) {
		t.Errorf("changes:\n%+v\nwant\n%+v", changes, want)
	}
	text := string(out)
	for _, s := range []string{
		"# Comments stay.",
		"expr: rate(x[5s])",
		"max_over_time(y[2h48m]) == 1",
		"for: 10s",
		"keep_firing_for: 2s",
		"interval: 1s",
		"description: held for 10m over [5m]", // annotations are prose
	} {
		if !strings.Contains(text, s) {
			t.Errorf("output lacks %q:\n%s", s, text)
		}
	}
	if d := changes[2].Parsed(); d.Seconds() != 10 {
		t.Errorf("Parsed() = %v, want 10s", d)
	}
}

func TestShortenErrors(t *testing.T) {
	for _, tc := range []struct{ name, in, err string }{
		{"not YAML", "groups: [", "yaml"},
		{"no groups", "rules: []\n", "no list of groups"},
		{"a list", "- a\n", "want a mapping at the top"},
		{"bad for", "groups:\n- name: g\n  rules:\n  - alert: A\n    expr: x\n    for: 1s\n", "group g, rule A: for:"},
		{"bad range", "groups:\n- name: g\n  rules:\n  - record: r\n    expr: rate(x[5q])\n", "group g, rule r: expr:"},
		{"for as a list", "groups:\n- name: g\n  rules:\n  - alert: A\n    expr: x\n    for: [1m]\n", "not a scalar"},
		{"bad interval", "groups:\n- name: g\n  interval: soon\n  rules: []\n", "group g: interval"},
	} {
		if _, _, err := Shorten([]byte(tc.in), 60); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: err = %v, want one with %q", tc.name, err, tc.err)
		}
	}
	if _, _, err := Shorten([]byte(sample), 0); err == nil {
		t.Error("factor 0 accepted")
	}
}

func shipped(t *testing.T) map[string][]byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(testexporter.Root(t), "rules", "*.yml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no rules/*.yml (%v)", err)
	}
	out := map[string][]byte{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(f)] = data
	}
	return out
}

// The shipped rules: every `for:` is shortened, the result loads in
// promtool, and factor 1 changes nothing Prometheus would read.
func TestShortenShippedRules(t *testing.T) {
	promtool := testexporter.Tool(t, "promtool")
	dir := t.TempDir()
	for name, data := range shipped(t) {
		out, changes, err := Shorten(data, 60)
		if err != nil {
			t.Fatalf("rules/%s: %v", name, err)
		}
		var rf struct {
			Groups []struct {
				Rules []struct {
					For string `yaml:"for"`
				} `yaml:"rules"`
			} `yaml:"groups"`
		}
		if err := yaml.Unmarshal(data, &rf); err != nil {
			t.Fatal(err)
		}
		fors := 0
		for _, g := range rf.Groups {
			for _, r := range g.Rules {
				if r.For != "" {
					fors++
				}
			}
		}
		got := 0
		for _, c := range changes {
			if c.Field == "for" {
				got++
				if c.Parsed()*60 < 60e9 {
					t.Errorf("%s: for %s became %s", c.Rule, c.From, c.To)
				}
			}
		}
		if got != fors || fors == 0 {
			t.Errorf("rules/%s: %d for: shortened, the file has %d", name, got, fors)
		}

		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, out, 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(promtool, "check", "rules", path).CombinedOutput(); err != nil {
			t.Errorf("promtool check rules on the shortened rules/%s: %v\n%s", name, err, out)
		}

		same, _, err := Shorten(data, 1)
		if err != nil {
			t.Fatal(err)
		}
		var a, b any
		if err := yaml.Unmarshal(data, &a); err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(same, &b); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Errorf("rules/%s: factor 1 changed the rules", name)
		}
	}
}

// Whatever the input, ShortenExpr does not panic, factor 1 is the
// identity, and a shortened expression differs from its input only in
// duration literals.
func FuzzShortenExpr(f *testing.F) {
	for _, s := range []string{
		`rate(x[5m])`, `max_over_time(rate(x[5m])[1h:1m] offset -1h)`, `x{a="[5m]"} # [1m]`,
		"`[`", `x[1h:]`, `x offset 5m`, `offset{offset="a"} offset 1d`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		same, _, err := ShortenExpr(expr, 1)
		if err != nil {
			return
		}
		if same != expr {
			t.Fatalf("factor 1 changed %q into %q", expr, same)
		}
		out, changes, err := ShortenExpr(expr, 4)
		if err != nil {
			return // a duration 4 does not divide
		}
		// The input with each change applied where it says is the output.
		var want strings.Builder
		last := 0
		for _, c := range changes {
			if c.Pos < last || c.Pos+len(c.From) > len(expr) || expr[c.Pos:c.Pos+len(c.From)] != c.From {
				t.Fatalf("%q: change %+v is not where it says", expr, c)
			}
			want.WriteString(expr[last:c.Pos])
			want.WriteString(c.To)
			last = c.Pos + len(c.From)
		}
		want.WriteString(expr[last:])
		if out != want.String() {
			t.Fatalf("%q → %q: more changed than its durations %+v", expr, out, changes)
		}
	})
}
