package rules_test

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// A vector selector found in a PromQL expression: the metric name and its
// label matchers.
type selector struct {
	Name     string
	Matchers []matcher
}

type matcher struct {
	Label, Op, Value string
}

// Words that are PromQL syntax, not metric names: binary set operators,
// modifiers, aggregation operators (which may be followed by `by (...)`
// rather than a parenthesis) and number literals.
var promqlKeywords = map[string]bool{
	"and": true, "or": true, "unless": true, "atan2": true, "bool": true, "offset": true,
	"inf": true, "nan": true,
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true,
	"stdvar": true, "count": true, "count_values": true, "bottomk": true, "topk": true,
	"quantile": true, "limitk": true, "limit_ratio": true,
}

// Clauses followed by a parenthesised list of label names.
var promqlLabelLists = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
}

// selectors lists the vector selectors of a PromQL expression. It is a
// lexer, not a parser: it knows just enough (strings, ranges, label lists,
// function calls) to tell metric names from everything else. The product's
// go.mod stays free of the Prometheus server module this way; promtool
// checks the full syntax separately.
func selectors(expr string) ([]selector, error) {
	var out []selector
	s := expr
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '#': // comment to the end of the line
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '"' || c == '\'' || c == '`':
			_, end, err := readString(s, i)
			if err != nil {
				return nil, err
			}
			i = end
		case isDigit(c) || (c == '.' && i+1 < len(s) && isDigit(s[i+1])):
			// Numbers and durations: 0.5, 1e9, 0x1f, 5m, 1h30m.
			for i < len(s) && (isIdentChar(s[i]) || s[i] == '.') {
				i++
			}
		case c == '[': // range or subquery: [5m], [1h:1m]
			end := strings.IndexByte(s[i:], ']')
			if end < 0 {
				return nil, fmt.Errorf("unterminated [ at offset %d", i)
			}
			i += end + 1
		case c == '{':
			return nil, fmt.Errorf("selector without a metric name at offset %d", i)
		case isIdentStart(c):
			start := i
			for i < len(s) && (isIdentChar(s[i]) || s[i] == ':') {
				i++
			}
			word := s[start:i]
			lower := strings.ToLower(word)
			next := skipSpace(s, i)
			switch {
			case promqlLabelLists[lower]:
				if next < len(s) && s[next] == '(' {
					end := strings.IndexByte(s[next:], ')')
					if end < 0 || strings.ContainsAny(s[next+1:next+end], "({[\"'`") {
						return nil, fmt.Errorf("bad label list after %s at offset %d", word, next)
					}
					i = next + end + 1
				}
			case promqlKeywords[lower]:
			case next < len(s) && s[next] == '(': // a function call
			default:
				sel := selector{Name: word}
				if next < len(s) && s[next] == '{' {
					ms, end, err := readMatchers(s, next)
					if err != nil {
						return nil, fmt.Errorf("%s: %w", word, err)
					}
					sel.Matchers = ms
					i = end
				}
				out = append(out, sel)
			}
		default:
			i++
		}
	}
	return out, nil
}

// readMatchers reads `{label op "value", ...}` starting at the brace and
// returns the matchers and the offset after the closing brace.
func readMatchers(s string, i int) ([]matcher, int, error) {
	var ms []matcher
	i++ // {
	for {
		i = skipSpace(s, i)
		if i < len(s) && s[i] == ',' {
			i = skipSpace(s, i+1)
		}
		if i >= len(s) {
			return nil, i, fmt.Errorf("unterminated {")
		}
		if s[i] == '}' {
			return ms, i + 1, nil
		}
		start := i
		for i < len(s) && isIdentChar(s[i]) {
			i++
		}
		if start == i || !isIdentStart(s[start]) {
			return nil, i, fmt.Errorf("bad label name at offset %d", start)
		}
		label := s[start:i]
		i = skipSpace(s, i)
		var op string
		for _, candidate := range []string{"=~", "!~", "!=", "="} {
			if strings.HasPrefix(s[i:], candidate) {
				op = candidate
				break
			}
		}
		if op == "" {
			return nil, i, fmt.Errorf("label %s: no matcher operator", label)
		}
		i = skipSpace(s, i+len(op))
		if i >= len(s) || (s[i] != '"' && s[i] != '\'' && s[i] != '`') {
			return nil, i, fmt.Errorf("label %s: value is not a string", label)
		}
		value, end, err := readString(s, i)
		if err != nil {
			return nil, i, err
		}
		ms = append(ms, matcher{Label: label, Op: op, Value: value})
		i = end
	}
}

// readString reads a PromQL string literal starting at its quote and
// returns its value and the offset after the closing quote.
func readString(s string, i int) (string, int, error) {
	quote := s[i]
	j := i + 1
	for j < len(s) && s[j] != quote {
		if s[j] == '\\' && quote != '`' {
			j++
		}
		j++
	}
	if j >= len(s) {
		return "", j, fmt.Errorf("unterminated string at offset %d", i)
	}
	raw := s[i : j+1]
	if quote == '\'' {
		// Go has no single-quoted strings: requote the body.
		body := strings.ReplaceAll(raw[1:len(raw)-1], `\'`, `'`)
		raw = `"` + strings.ReplaceAll(body, `"`, `\"`) + `"`
	}
	value, err := strconv.Unquote(raw)
	if err != nil {
		return "", j + 1, fmt.Errorf("bad string at offset %d: %v", i, err)
	}
	return value, j + 1, nil
}

func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

func isDigit(c byte) bool      { return c >= '0' && c <= '9' }
func isIdentStart(c byte) bool { return c == '_' || (c|0x20 >= 'a' && c|0x20 <= 'z') }
func isIdentChar(c byte) bool  { return isIdentStart(c) || isDigit(c) }

func TestSelectors(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want string // selectors as name{label op value,...} joined by spaces
	}{
		{`spark_pool_free_bytes < spark_pool_reserve_bytes`, `spark_pool_free_bytes spark_pool_reserve_bytes`},
		{`rate(spark_pool_pressure_stall_seconds_total{kind="full"}[5m]) > 0.05`, `spark_pool_pressure_stall_seconds_total{kind=full}`},
		{`sum without (type) (rate(spark_pool_refaults_total[5m]))`, `spark_pool_refaults_total`},
		{`max by(instance, job) (x) * on (instance) group_left (gpu) y`, `x y`},
		{`a > ignoring (plan) group_left b unless ignoring (plan, role) (c{role="training"} > 0)`, `a b c{role=training}`},
		{`instance:spark_pool_refaults:rate5m > 1e3 and 4 * 1024^3 < z offset 5m`, `instance:spark_pool_refaults:rate5m z`},
		{`max_over_time(m{reason=~"sw_thermal_slowdown|hw_thermal_slowdown", gpu!="1"}[2m:30s]) == bool 1`, `m{reason=~sw_thermal_slowdown|hw_thermal_slowdown,gpu!=1}`},
		{`label_replace(m, "dst", "$1", "src", "(.*)")`, `m`},
		{"m{a='x',b=`y`} # a comment naming not_a_metric", `m{a=x,b=y}`},
		{`vector(1)`, ``},
		{`topk(3, sum by (pid) (m)) AND ON() n`, `m n`},
	} {
		got, err := selectors(tc.expr)
		if err != nil {
			t.Errorf("selectors(%q): %v", tc.expr, err)
			continue
		}
		var parts []string
		for _, sel := range got {
			p := sel.Name
			if len(sel.Matchers) > 0 {
				var ms []string
				for _, m := range sel.Matchers {
					ms = append(ms, m.Label+m.Op+m.Value)
				}
				p += "{" + strings.Join(ms, ",") + "}"
			}
			parts = append(parts, p)
		}
		if g := strings.Join(parts, " "); g != tc.want {
			t.Errorf("selectors(%q) = %q, want %q", tc.expr, g, tc.want)
		}
	}
}

func TestSelectorsRejects(t *testing.T) {
	for _, expr := range []string{
		`{__name__="m"}`,
		`m{kind="full"`,
		`m{kind=full}`,
		`m{kind}`,
		`rate(m[5m)`,
		`m{kind="unterminated}`,
		`sum by (a (m)`,
	} {
		if sels, err := selectors(expr); err == nil {
			t.Errorf("selectors(%q) = %v, want an error", expr, sels)
		}
	}
}

var (
	metricNameRE = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	labelNameRE  = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
)

func FuzzSelectors(f *testing.F) {
	for _, seed := range []string{
		`spark_pool_free_bytes < spark_pool_reserve_bytes`,
		`sum without (type) (rate(spark_pool_refaults_total{type="anon"}[5m]))`,
		`m{a=~'x\'y', b!="\"q\""} offset 1h and on() vector(1)`,
		"m{a=`raw`}[1h:5m]",
		`{`, `m{`, `"`, `[`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, expr string) {
		sels, err := selectors(expr)
		if err != nil {
			return
		}
		for _, sel := range sels {
			if !metricNameRE.MatchString(sel.Name) {
				t.Fatalf("selectors(%q): bad metric name %q", expr, sel.Name)
			}
			for _, m := range sel.Matchers {
				if !labelNameRE.MatchString(m.Label) {
					t.Fatalf("selectors(%q): bad label name %q", expr, m.Label)
				}
				switch m.Op {
				case "=", "!=", "=~", "!~":
				default:
					t.Fatalf("selectors(%q): bad operator %q", expr, m.Op)
				}
			}
		}
	})
}
