// Package rulesxform makes the test-only copies of the shipped rules and
// Alertmanager configuration that the end-to-end test (test/e2e) runs in a
// real Prometheus and Alertmanager, on a clock a factor faster.
//
// Rules (Shorten): every
// duration that shapes when an alert fires — `for:`, `keep_firing_for:`,
// a group's `interval:` and `query_offset:`, and the range, subquery and
// offset durations inside `expr:` — divided by one factor. With factor 60 an
// alert held 10 minutes over a 5-minute rate fires after 10 seconds over a
// 5-second rate: the same rule, on a clock 60 times faster.
//
// One factor for every duration keeps the ratios between them, which is
// what the rules' judgement rests on (a window twice as long as another
// stays twice as long). A duration the factor does not divide into whole
// milliseconds is an error rather than a rounding, so the ratios hold
// exactly.
//
// The transform works on the text: rules/*.yml keep their durations as
// plain literals for it. Everything else in the file (labels, annotations,
// comments) keeps its meaning; the YAML encoder may re-flow folded strings.
package rulesxform

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"
)

// Change is one duration the transform rewrote.
type Change struct {
	Group string // the rule group's name
	Rule  string // the alert or recording rule's name; "" for a group field
	Field string // for, keep_firing_for, expr, interval, query_offset
	From  string // the literal as written
	To    string // the literal written instead
	Pos   int    // in an expr, the byte offset of From
}

// Parsed returns the rewritten duration.
func (c Change) Parsed() time.Duration {
	d, _ := model.ParseDuration(c.To) // To was written by ShortenDuration
	return time.Duration(d)
}

// Duration fields of a rule group and of a rule.
var (
	groupFields = []string{"interval", "query_offset"}
	ruleFields  = []string{"for", "keep_firing_for"}
)

// Shorten returns the rule file src with every duration divided by factor,
// and the list of what it changed.
func Shorten(src []byte, factor int) ([]byte, []Change, error) {
	if factor < 1 {
		return nil, nil, fmt.Errorf("factor %d: want 1 or more", factor)
	}
	doc, err := parseMapping(src)
	if err != nil {
		return nil, nil, fmt.Errorf("not a rule file: %w", err)
	}
	groups := value(doc.Content[0], "groups")
	if groups == nil || groups.Kind != yaml.SequenceNode {
		return nil, nil, errors.New("not a rule file: no list of groups")
	}

	var changes []Change
	for _, g := range groups.Content {
		if g.Kind != yaml.MappingNode {
			return nil, nil, errors.New("a group is not a mapping")
		}
		group := scalar(g, "name")
		for _, f := range groupFields {
			c, err := shortenField(g, f, factor)
			if err != nil {
				return nil, nil, fmt.Errorf("group %s: %s: %w", group, f, err)
			}
			changes = append(changes, stamp(c, group, "")...)
		}
		rules := value(g, "rules")
		if rules == nil {
			continue
		}
		for _, r := range rules.Content {
			if r.Kind != yaml.MappingNode {
				return nil, nil, fmt.Errorf("group %s: a rule is not a mapping", group)
			}
			name := scalar(r, "alert") + scalar(r, "record")
			for _, f := range append(ruleFields, "expr") {
				c, err := shortenField(r, f, factor)
				if err != nil {
					return nil, nil, fmt.Errorf("group %s, rule %s: %s: %w", group, name, f, err)
				}
				changes = append(changes, stamp(c, group, name)...)
			}
		}
	}

	out, err := encode(doc)
	return out, changes, err
}

// parseMapping parses a YAML document whose top level is a mapping.
func parseMapping(src []byte) (*yaml.Node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, err
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, errors.New("want a mapping at the top")
	}
	return &doc, nil
}

func encode(doc *yaml.Node) ([]byte, error) {
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

func stamp(cs []Change, group, rule string) []Change {
	for i := range cs {
		cs[i].Group, cs[i].Rule = group, rule
	}
	return cs
}

// shortenField rewrites the scalar under key in the mapping m, if present:
// an expression, or a duration.
func shortenField(m *yaml.Node, key string, factor int) ([]Change, error) {
	v := value(m, key)
	if v == nil {
		return nil, nil
	}
	if v.Kind != yaml.ScalarNode {
		return nil, errors.New("not a scalar")
	}
	if key == "expr" {
		out, changes, err := ShortenExpr(v.Value, factor)
		if err != nil {
			return nil, err
		}
		v.Value = out
		for i := range changes {
			changes[i].Field = key
		}
		return changes, nil
	}
	out, err := ShortenDuration(v.Value, factor)
	if err != nil {
		return nil, err
	}
	c := Change{Field: key, From: v.Value, To: out}
	v.Value = out
	return []Change{c}, nil
}

// value returns the value node under key in the mapping m, or nil.
func value(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

func scalar(m *yaml.Node, key string) string {
	if v := value(m, key); v != nil && v.Kind == yaml.ScalarNode {
		return v.Value
	}
	return ""
}

// ShortenDuration divides a Prometheus duration literal ("10m", "1h30m",
// "0s") by factor. The result must be a whole number of milliseconds, the
// resolution Prometheus keeps; a zero stays zero.
func ShortenDuration(s string, factor int) (string, error) {
	if factor < 1 {
		return "", fmt.Errorf("factor %d: want 1 or more", factor)
	}
	d, err := model.ParseDuration(s)
	if err != nil {
		return "", err
	}
	ms := int64(time.Duration(d) / time.Millisecond)
	if time.Duration(d)%time.Millisecond != 0 || ms%int64(factor) != 0 {
		return "", fmt.Errorf("%s is not a whole number of milliseconds once divided by %d", s, factor)
	}
	if factor == 1 {
		return s, nil // as written: "90s" stays "90s", not "1m30s"
	}
	return model.Duration(time.Duration(ms/int64(factor)) * time.Millisecond).String(), nil
}

// ShortenExpr divides the durations of a PromQL expression by factor: range
// selectors and subqueries (`[5m]`, `[10m:1m]`, `[10m:]`) and offsets
// (`offset 1h`, `offset -5m`). The rest of the text, string literals and
// comments included, is kept byte for byte, so factor 1 returns expr
// unchanged. Text in brackets that is not a duration is an error, not
// something to skip: a window the transform missed would keep its
// production length and the test would wait for it in vain.
func ShortenExpr(expr string, factor int) (string, []Change, error) {
	if factor < 1 {
		return "", nil, fmt.Errorf("factor %d: want 1 or more", factor)
	}
	var (
		b       strings.Builder
		changes []Change
	)
	// rewrite writes the duration literal lit, found at pos, shortened.
	rewrite := func(lit string, pos int) error {
		out, err := ShortenDuration(lit, factor)
		if err != nil {
			return err
		}
		changes = append(changes, Change{From: lit, To: out, Pos: pos})
		b.WriteString(out)
		return nil
	}
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			end, err := stringEnd(expr, i)
			if err != nil {
				return "", nil, err
			}
			b.WriteString(expr[i:end])
			i = end
		case c == '#':
			end := strings.IndexByte(expr[i:], '\n')
			if end < 0 {
				end = len(expr) - i
			}
			b.WriteString(expr[i : i+end])
			i += end
		case c == '[':
			end := strings.IndexByte(expr[i:], ']')
			if end < 0 {
				return "", nil, fmt.Errorf("unclosed [ at byte %d", i)
			}
			inner := expr[i+1 : i+end]
			if strings.Count(inner, ":") > 1 {
				return "", nil, fmt.Errorf("[%s] is neither a range nor a subquery", inner)
			}
			b.WriteByte('[')
			pos := i + 1
			for j, part := range strings.Split(inner, ":") {
				if j > 0 {
					b.WriteByte(':')
					pos++
				}
				lit := strings.TrimSpace(part)
				lead := part[:strings.Index(part, lit)]
				b.WriteString(lead)
				// [10m:]: a subquery's step may be left out; it is then
				// the evaluation interval, which the test sets itself.
				if lit != "" || j == 0 {
					if err := rewrite(lit, pos+len(lead)); err != nil {
						return "", nil, fmt.Errorf("[%s]: %w", inner, err)
					}
				}
				b.WriteString(part[len(lead)+len(lit):])
				pos += len(part)
			}
			b.WriteByte(']')
			i += end + 1
		case isIdentStart(c):
			end := i + 1
			for end < len(expr) && isIdentChar(expr[end]) {
				end++
			}
			word := expr[i:end]
			b.WriteString(word)
			i = end
			if !strings.EqualFold(word, "offset") {
				continue
			}
			// "offset" followed by a duration is the modifier; followed by
			// anything else it is a name (a label called offset).
			j := i
			for j < len(expr) && (expr[j] == ' ' || expr[j] == '\t' || expr[j] == '\n') {
				j++
			}
			if j < len(expr) && expr[j] == '-' {
				j++
			}
			k := j
			for k < len(expr) && (isDigit(expr[k]) || isLetter(expr[k])) {
				k++
			}
			if j == k || !isDigit(expr[j]) {
				continue
			}
			b.WriteString(expr[i:j])
			if err := rewrite(expr[j:k], j); err != nil {
				return "", nil, fmt.Errorf("offset: %w", err)
			}
			i = k
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String(), changes, nil
}

// stringEnd returns the index just past the string literal that opens at
// s[start]: "…" and '…' with backslash escapes, `…` raw.
func stringEnd(s string, start int) (int, error) {
	quote := s[start]
	for i := start + 1; i < len(s); i++ {
		switch {
		case s[i] == '\\' && quote != '`':
			i++
		case s[i] == quote:
			return i + 1, nil
		}
	}
	return 0, fmt.Errorf("unclosed string at byte %d", start)
}

func isDigit(c byte) bool  { return c >= '0' && c <= '9' }
func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// PromQL names: metric names may hold colons (recording rules), label
// names may not, but both end where other characters begin.
func isIdentStart(c byte) bool { return isLetter(c) || c == '_' || c == ':' }
func isIdentChar(c byte) bool  { return isIdentStart(c) || isDigit(c) }
