// Command promqlnames parses PromQL expressions with Prometheus' own parser
// and lists the metric names each one selects. Tests in the main module use
// it to check dashboards and rules against the metrics the exporter exports,
// without putting github.com/prometheus/prometheus in the exporter's go.mod.
//
// Input on stdin: a JSON array of expressions. Output on stdout: a JSON array
// of the same length, each element {"metrics": [...], "selectors": [...],
// "thresholds": [...]} or {"error": "..."}: the metric names selected, each
// vector selector with its label matchers (the metric name's own matcher left
// out), and each comparison of an expression with a number. A selector
// without a plain metric name ({__name__=~"..."}) is listed as its PromQL
// text, so a caller that expects names sees it as unknown.
package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"

	"github.com/prometheus/prometheus/promql/parser"
)

type result struct {
	Metrics    []string    `json:"metrics,omitempty"`
	Selectors  []selector  `json:"selectors,omitempty"`
	Thresholds []threshold `json:"thresholds,omitempty"`
	Error      string      `json:"error,omitempty"`
}

// threshold is one comparison of an expression with a number: the
// expression compared (its PromQL text), the operator as written with the
// expression on its left, and the number (constant arithmetic such as
// 4 * 1024^3 evaluated).
type threshold struct {
	Expr  string  `json:"expr"`
	Op    string  `json:"op"`
	Value float64 `json:"value"`
}

type selector struct {
	Name     string    `json:"name"`
	Matchers []matcher `json:"matchers,omitempty"`
}

type matcher struct {
	Label string `json:"label"`
	Op    string `json:"op"` // =, !=, =~, !~
	Value string `json:"value"`
}

func main() {
	var exprs []string
	if err := json.NewDecoder(os.Stdin).Decode(&exprs); err != nil {
		fmt.Fprintln(os.Stderr, "promqlnames: reading a JSON array of expressions:", err)
		os.Exit(2)
	}
	// Default options: experimental functions are off, as in a Prometheus
	// started without feature flags.
	p := parser.NewParser(parser.Options{})
	results := make([]result, len(exprs))
	for i, e := range exprs {
		results[i] = names(p, e)
	}
	if err := json.NewEncoder(os.Stdout).Encode(results); err != nil {
		fmt.Fprintln(os.Stderr, "promqlnames:", err)
		os.Exit(1)
	}
}

func names(p parser.Parser, input string) result {
	expr, err := p.ParseExpr(input)
	if err != nil {
		return result{Error: err.Error()}
	}
	seen := map[string]bool{}
	var r result
	parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
		if be, ok := n.(*parser.BinaryExpr); ok && be.Op.IsComparisonOperator() {
			if v, ok := constant(be.RHS); ok {
				r.Thresholds = append(r.Thresholds, threshold{Expr: be.LHS.String(), Op: be.Op.String(), Value: v})
			} else if v, ok := constant(be.LHS); ok {
				r.Thresholds = append(r.Thresholds, threshold{Expr: be.RHS.String(), Op: mirrored[be.Op.String()], Value: v})
			}
		}
		if vs, ok := n.(*parser.VectorSelector); ok {
			name := vs.Name
			if name == "" {
				name = vs.String()
			}
			seen[name] = true
			sel := selector{Name: name}
			for _, m := range vs.LabelMatchers {
				if m.Name != "__name__" {
					sel.Matchers = append(sel.Matchers, matcher{Label: m.Name, Op: m.Type.String(), Value: m.Value})
				}
			}
			r.Selectors = append(r.Selectors, sel)
		}
		return nil
	})
	for name := range seen {
		r.Metrics = append(r.Metrics, name)
	}
	sort.Strings(r.Metrics)
	return r
}

// mirrored is the operator with its sides swapped: 5 < x is x > 5.
var mirrored = map[string]string{"==": "==", "!=": "!=", "<": ">", ">": "<", "<=": ">=", ">=": "<="}

// constant evaluates an expression made only of numbers.
func constant(e parser.Expr) (float64, bool) {
	switch e := e.(type) {
	case *parser.NumberLiteral:
		return e.Val, true
	case *parser.ParenExpr:
		return constant(e.Expr)
	case *parser.UnaryExpr:
		v, ok := constant(e.Expr)
		if e.Op == parser.SUB {
			v = -v
		}
		return v, ok
	case *parser.BinaryExpr:
		a, okA := constant(e.LHS)
		b, okB := constant(e.RHS)
		if !okA || !okB {
			return 0, false
		}
		switch e.Op {
		case parser.ADD:
			return a + b, true
		case parser.SUB:
			return a - b, true
		case parser.MUL:
			return a * b, true
		case parser.DIV:
			return a / b, true
		case parser.POW:
			return math.Pow(a, b), true
		}
	}
	return 0, false
}
