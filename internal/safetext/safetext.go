// Package safetext keeps text from elsewhere from acting on what shows it:
// a control character starts a terminal escape sequence, a format character
// reorders (U+202E) or hides what follows (https://trojansource.codes).
package safetext

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

func isUnsafe(r rune) bool {
	return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp)
}

func Index(s string) int { return strings.IndexFunc(s, isUnsafe) }

// Strip also replaces invalid UTF-8 with U+FFFD.
func Strip(s string) string {
	if Index(s) < 0 && utf8.ValidString(s) {
		return s
	}
	return strings.Map(func(r rune) rune {
		if isUnsafe(r) {
			return -1
		}
		return r
	}, strings.ToValidUTF8(s, string(utf8.RuneError)))
}

// StripText is Strip keeping newlines.
func StripText(s string) string {
	if Index(s) < 0 && utf8.ValidString(s) {
		return s
	}
	return strings.Map(func(r rune) rune {
		if r != '\n' && isUnsafe(r) {
			return -1
		}
		return r
	}, strings.ToValidUTF8(s, string(utf8.RuneError)))
}

// Args strips every string, so that a newline in one cannot start a line
// that reads as the program's own.
func Args(args []any) []any {
	out, copied := args, false
	for i, a := range args {
		s, ok := a.(string)
		if !ok || (Index(s) < 0 && utf8.ValidString(s)) {
			continue
		}
		if !copied {
			out, copied = append([]any(nil), args...), true
		}
		out[i] = Strip(s)
	}
	return out
}
