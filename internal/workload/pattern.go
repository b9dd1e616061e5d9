package workload

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Pattern is a user's rule (--workloads.match role:kind:regex), matched
// against the arguments joined by single spaces.
type Pattern struct {
	Role Role
	Kind string
	re   *regexp.Regexp
}

// kindName keeps kinds fit for a label value and free of anything else a
// user might paste (paths, flags).
var kindName = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// ParsePattern reads role:kind:regex. The regular expression is Go's (RE2):
// it runs in time linear in the command line, whatever the pattern.
func ParsePattern(s string) (Pattern, error) {
	role, rest, ok1 := strings.Cut(s, ":")
	kind, expr, ok2 := strings.Cut(rest, ":")
	if !ok1 || !ok2 {
		return Pattern{}, errors.New("want role:kind:regex, e.g. training:my_trainer:python3 .*/finetune\\.py")
	}
	r := Role(role)
	if r != Inference && r != Training {
		return Pattern{}, fmt.Errorf("role must be %s or %s", Inference, Training)
	}
	if !kindName.MatchString(kind) {
		return Pattern{}, errors.New("kind must be lower-case letters, digits and underscores, starting with a letter")
	}
	if expr == "" {
		return Pattern{}, errors.New("the regular expression is empty, and would match every process")
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return Pattern{}, fmt.Errorf("bad regular expression: %w", err)
	}
	return Pattern{Role: r, Kind: kind, re: re}, nil
}
