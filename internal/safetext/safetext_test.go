package safetext

import (
	"testing"
	"unicode/utf8"
)

func TestStrip(t *testing.T) {
	for in, want := range map[string]string{
		"NVIDIA GB10":                     "NVIDIA GB10",
		"\x1b[2J\x1b[HFits now":           "[2J[HFits now",
		"Throttling\u202e gnildnah":       "Throttling gnildnah",
		"a\u2066b\u2069c\u200bd\u00ade":   "abcde",
		"bell\x07 del\x7f csi\u009b31m x": "bell del csi31m x",
		"line\nnext\r\ttab\u2028sep":      "linenexttabsep",
		"bad \xff utf-8":                  "bad \ufffd utf-8",
		"Grüße 温度 🌡":                      "Grüße 温度 🌡",
	} {
		if got := Strip(in); got != want {
			t.Errorf("Strip(%q) = %q, want %q", in, got, want)
		}
		if out := Strip(in); Index(out) >= 0 || !utf8.ValidString(out) {
			t.Errorf("Strip(%q) leaves an unsafe rune", in)
		}
	}
}

func FuzzStrip(f *testing.F) {
	f.Add("\x1b]0;title\x07\u202eabc")
	f.Fuzz(func(t *testing.T, s string) {
		if out := Strip(s); Index(out) >= 0 || !utf8.ValidString(out) {
			t.Errorf("Strip(%q) = %q keeps an unsafe rune", s, out)
		}
	})
}

func TestStripTextKeepsLines(t *testing.T) {
	if got := StripText("a\x1b[2J\nb\u202ec\n"); got != "a[2J\nbc\n" {
		t.Errorf("StripText = %q", got)
	}
}

func TestArgs(t *testing.T) {
	args := []any{"GB10\x1b[2J", 3, "ok", "x\nverdict: fine"}
	got := Args(args)
	want := []any{"GB10[2J", 3, "ok", "xverdict: fine"}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("Args[%d] = %v, want %v", i, got[i], want[i])
		}
	}
	if args[0] != "GB10\x1b[2J" {
		t.Error("Args changed its argument")
	}
}
