// Package cliflag gives kingpin flags whose bad values are refused with a
// message that names the flag. Kingpin's own typed flags report only the
// parser's error ("units: invalid lots"), which leaves a user guessing which
// of twenty flags was wrong.
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

// FlagGroup is a kingpin application or command: where a feature
// registers its flags (collector.AddFlags, gpu.AddFlags, logging.AddFlags).
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
	return fmt.Errorf("invalid value %q for flag --%s: %w", RedactURL(value), flag, err)
}

// userinfo is the credentials part of a URL, parseable or not:
// scheme://user:password@.
var userinfo = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9+.-]*://)[^/?#]*@`)

// RedactURL replaces the credentials a URL-like value carries
// (http://user:password@host) by "xxxxx", so that an error quoting it
// shows no password, whether or not the URL parses.
func RedactURL(value string) string {
	return userinfo.ReplaceAllString(value, "${1}xxxxx@")
}

func (v *parsed[T]) String() string { return v.text }

// Value binds the flag to a value produced by parse. The flag's default, if
// any, goes through parse too, so a bad default fails as loudly as a bad
// argument.
func Value[T any](fc *kingpin.FlagClause, parse func(string) (T, error)) *T {
	dst := new(T)
	fc.SetValue(&parsed[T]{name: fc.Model().Name, dst: dst, parse: parse})
	return dst
}

// repeated is a flag that may be given many times, its values kept in order.
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

// IsCumulative tells kingpin that the flag may be repeated.
func (v *repeated[T]) IsCumulative() bool { return true }

// List binds a repeatable flag: every occurrence goes through parse, and a
// bad one is refused naming the flag.
func List[T any](fc *kingpin.FlagClause, parse func(string) (T, error)) *[]T {
	dst := new([]T)
	fc.SetValue(&repeated[T]{name: fc.Model().Name, dst: dst, parse: parse})
	return dst
}

// Bytes is a size with a unit, as in 4GiB or 512MiB.
func Bytes(fc *kingpin.FlagClause) *uint64 { return Value(fc, ParseBytes) }

// Duration is a positive Go duration such as 5s or 10m.
func Duration(fc *kingpin.FlagClause) *time.Duration { return Value(fc, ParsePositiveDuration) }

// Int is a whole number within [min, max].
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

// Float is a number within [min, max].
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

// Enum is one of the given words.
func Enum(fc *kingpin.FlagClause, options ...string) *string {
	return Value(fc, func(s string) (string, error) {
		if !slices.Contains(options, s) {
			return "", fmt.Errorf("must be one of %s", strings.Join(options, ", "))
		}
		return s, nil
	})
}

// byteUnits are the units a size may be written in: SI prefixes are powers
// of 1000 and IEC prefixes powers of 1024, as the units' standards
// (IEC 80000-13) and free(1)'s --si and --giga/--gibi agree.
var byteUnits = map[string]float64{
	"": 1, "B": 1,
	"kB": 1e3, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
	"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
}

// ParseBytes reads a size with its unit, or a plain number of bytes: 4GiB
// is 4×2^30 bytes, 4GB 4×10^9. An ambiguous unit (4G, 4g, 4gb) is refused
// rather than guessed. alecthomas/units reads GB as 2^30 in ParseBase2Bytes
// and refuses GiB in ParseMetricBytes, hence this small parser.
func ParseBytes(s string) (uint64, error) {
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

// ParsePositiveDuration reads a Go duration (5s, 10m, 1h30m) greater than zero.
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

// RefuseSwitchValues refuses, naming the flag, a switch (a kingpin bool flag)
// given a value, such as --collector.gpu=maybe: kingpin takes the value for
// a stray argument and reports only "unexpected maybe". "--" ends the flags.
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
		case f == nil:
			// Unknown: kingpin refuses it by name.
		case f.IsBoolFlag() && hasValue:
			return refused(value, f.Name, fmt.Errorf("a switch takes no value; give --%s or --no-%s", f.Name, f.Name))
		case !f.IsBoolFlag() && !hasValue:
			i++ // the next argument is the flag's value
		}
	}
	return nil
}
