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
	"github.com/alecthomas/units"
)

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

// repeated is a flag that may be given many times; each value is parsed
// and kept in order.
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

// Lookup returns the parsed value of a flag that another part of the
// program bound with Value (or Bytes, Int, …), for a command that shares the
// flag rather than defining a second one with the same meaning. It reports
// false when fc is nil or holds another type.
func Lookup[T any](fc *kingpin.FlagClause) (T, bool) {
	var zero T
	if fc == nil {
		return zero, false
	}
	v, ok := fc.Model().Value.(*parsed[T])
	if !ok {
		return zero, false
	}
	return *v.dst, true
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

// ParseBytes reads a non-negative size with a binary unit (4GiB, 512MiB,
// 1024KiB) or a plain number of bytes.
func ParseBytes(s string) (uint64, error) {
	b, err := units.ParseBase2Bytes(s)
	if err != nil {
		return 0, fmt.Errorf("not a size; use a unit such as 4GiB or 512MiB")
	}
	if b < 0 {
		return 0, fmt.Errorf("must not be negative")
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

// RefuseSwitchValues checks args for a switch (a kingpin bool flag) given a
// value, such as --collector.gpu=maybe or --web.systemd-socket=false, and
// refuses it naming the flag. Kingpin itself takes the value for a stray
// argument and reports only "unexpected maybe". Flags of every command are
// looked at; "--" ends the flags.
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
