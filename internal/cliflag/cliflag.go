// Package cliflag gives kingpin flags whose errors name the flag: kingpin's
// own report only the parser's ("units: invalid lots").
package cliflag

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"
)

// FlagGroup is a kingpin application or command.
type FlagGroup interface {
	Flag(name, help string) *kingpin.FlagClause
}

type parsed[T any] struct {
	name  string
	text  string
	dst   *T
	parse func(string) (T, error)
}

func (v *parsed[T]) Set(s string) error {
	x, err := v.parse(s)
	if err != nil {
		return refused(s, v.name, err)
	}
	*v.dst = x
	v.text = s
	return nil
}

func refused(value, flag string, err error) error {
	return fmt.Errorf("invalid value %q for flag --%s: %w", redactURL(value), flag, err)
}

// userinfo matches a URL's credentials whether or not it parses.
var userinfo = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9+.-]*://)[^/?#]*@`)

func redactURL(value string) string {
	return userinfo.ReplaceAllString(value, "${1}xxxxx@")
}

func (v *parsed[T]) String() string { return v.text }

// Value parses the default too, so a bad default fails as loudly as a bad argument.
func Value[T any](fc *kingpin.FlagClause, parse func(string) (T, error)) *T {
	dst := new(T)
	fc.SetValue(&parsed[T]{name: fc.Model().Name, dst: dst, parse: parse})
	return dst
}

type repeated[T any] struct {
	name  string
	texts []string
	dst   *[]T
	parse func(string) (T, error)
}

func (v *repeated[T]) Set(s string) error {
	x, err := v.parse(s)
	if err != nil {
		return refused(s, v.name, err)
	}
	*v.dst = append(*v.dst, x)
	v.texts = append(v.texts, s)
	return nil
}

func (v *repeated[T]) String() string { return strings.Join(v.texts, ",") }

func (v *repeated[T]) IsCumulative() bool { return true }

// List binds a repeatable flag.
func List[T any](fc *kingpin.FlagClause, parse func(string) (T, error)) *[]T {
	dst := new([]T)
	fc.SetValue(&repeated[T]{name: fc.Model().Name, dst: dst, parse: parse})
	return dst
}

func Bytes(fc *kingpin.FlagClause) *uint64 { return Value(fc, parseBytes) }

func Duration(fc *kingpin.FlagClause) *time.Duration { return Value(fc, ParsePositiveDuration) }

func Int(fc *kingpin.FlagClause, min, max int) *int {
	return Value(fc, func(s string) (int, error) {
		n, err := strconv.Atoi(s)
		if err != nil {
			return 0, fmt.Errorf("not a whole number")
		}
		if n < min || n > max {
			return 0, fmt.Errorf("must be between %d and %d", min, max)
		}
		return n, nil
	})
}

func Float(fc *kingpin.FlagClause, min, max float64) *float64 {
	return Value(fc, func(s string) (float64, error) {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return 0, fmt.Errorf("not a number")
		}
		if !(f >= min && f <= max) { // also refuses NaN
			return 0, fmt.Errorf("must be between %g and %g", min, max)
		}
		return f, nil
	})
}

func Enum(fc *kingpin.FlagClause, options ...string) *string {
	return Value(fc, func(s string) (string, error) {
		if !slices.Contains(options, s) {
			return "", fmt.Errorf("must be one of %s", strings.Join(options, ", "))
		}
		return s, nil
	})
}

// byteUnits are IEC 80000-13's, as free(1)'s --si and --giga/--gibi agree.
var byteUnits = map[string]float64{
	"": 1, "B": 1,
	"kB": 1e3, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
	"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
}

// parseBytes refuses an ambiguous unit (4G, 4gb) rather than guess.
// alecthomas/units reads GB as 2^30 in ParseBase2Bytes and refuses GiB in
// ParseMetricBytes, hence this parser.
func parseBytes(s string) (uint64, error) {
	if strings.HasPrefix(s, "-") {
		return 0, fmt.Errorf("must not be negative")
	}
	i := strings.IndexFunc(s, func(r rune) bool { return !(r >= '0' && r <= '9' || r == '.') })
	if i < 0 {
		i = len(s)
	}
	if i == 0 {
		return 0, fmt.Errorf("not a size; use a unit such as 4GiB (4×2^30 bytes) or 4GB (4×10^9)")
	}
	number, unit := s[:i], s[i:]
	n, err := strconv.ParseFloat(number, 64)
	if err != nil {
		return 0, fmt.Errorf("not a size; use a unit such as 4GiB (4×2^30 bytes) or 4GB (4×10^9)")
	}
	scale, ok := byteUnits[unit]
	if !ok {
		return 0, fmt.Errorf("unit %q is ambiguous or unknown; write GiB for 2^30 bytes or GB for 10^9 (likewise KiB/kB, MiB/MB, TiB/TB)", unit)
	}
	b := n * scale
	if b >= 1<<64 {
		return 0, fmt.Errorf("too large")
	}
	return uint64(b), nil
}

func ParsePositiveDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("not a duration; use a unit such as 5s or 10m")
	}
	if d <= 0 {
		return 0, fmt.Errorf("must be greater than zero")
	}
	return d, nil
}

// RefuseSwitchValues refuses --collector.gpu=maybe naming the flag: kingpin
// reports only "unexpected maybe".
func RefuseSwitchValues(app *kingpin.ApplicationModel, args []string) error {
	flags := map[string]*kingpin.FlagModel{}
	var add func(group *kingpin.FlagGroupModel, cmds []*kingpin.CmdModel)
	add = func(group *kingpin.FlagGroupModel, cmds []*kingpin.CmdModel) {
		for _, f := range group.Flags {
			flags[f.Name] = f
		}
		for _, c := range cmds {
			add(c.FlagGroupModel, c.Commands)
		}
	}
	add(app.FlagGroupModel, app.Commands)

	for i := 0; i < len(args); i++ {
		long, ok := strings.CutPrefix(args[i], "--")
		if !ok {
			continue
		}
		if long == "" {
			return nil // "--": only arguments follow
		}
		name, value, hasValue := strings.Cut(long, "=")
		f := flags[name]
		if f == nil {
			if positive, negated := strings.CutPrefix(name, "no-"); negated && flags[positive] != nil && flags[positive].IsBoolFlag() {
				f = flags[positive]
			}
		}
		switch {
		case f == nil: // kingpin refuses it by name
		case f.IsBoolFlag() && hasValue:
			return refused(value, f.Name, fmt.Errorf("a switch takes no value; give --%s or --no-%s", f.Name, f.Name))
		case !f.IsBoolFlag() && !hasValue:
			i++ // the next argument is the flag's value
		}
	}
	return nil
}
