// Package safetext keeps text from elsewhere (a server's answer, a DMI
// string, a sensor's label) from acting on what shows it: a control
// character (ESC, or C1's one-byte CSI, starts a terminal escape sequence)
// or a format character (bidi overrides such as U+202E reorder what
// follows; zero-width ones hide text). See Unicode Technical Standard #39,
// section 4, and https://trojansource.codes.
package safetext

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Unsafe tells whether r must not reach a terminal, a label or an SVG: a
// control character (Cc: C0, DEL, C1), a format character (Cf: bidi
// overrides and isolates, zero-width characters, soft hyphen), a line or
// paragraph separator (U+2028, U+2029).
func Unsafe(r rune) bool {
	return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp)
}

// Index is the byte index of the first unsafe rune of s, or -1.
func Index(s string) int { return strings.IndexFunc(s, Unsafe) }

// Strip returns s without its unsafe runes, and with U+FFFD for invalid
// UTF-8, for a string shown to a person: what is left reads as the sender
// wrote it, less what would have acted on the terminal.
func Strip(s string) string {
	if Index(s) < 0 && utf8.ValidString(s) {
		return s
	}
	return strings.Map(func(r rune) rune {
		if Unsafe(r) {
			return -1
		}
		return r
	}, strings.ToValidUTF8(s, string(utf8.RuneError)))
}

// StripText is Strip for text of many lines: its newlines are kept.
func StripText(s string) string {
	if Index(s) < 0 && utf8.ValidString(s) {
		return s
	}
	return strings.Map(func(r rune) rune {
		if r != '\n' && Unsafe(r) {
			return -1
		}
		return r
	}, strings.ToValidUTF8(s, string(utf8.RuneError)))
}

// Args returns args with every string among them stripped (Strip), for a
// format whose arguments come from elsewhere: a newline in one cannot
// start a line that reads as the program's own.
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
