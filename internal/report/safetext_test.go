package report

import (
	"bytes"
	"encoding/xml"
	"io"
	"strings"
	"testing"
	"time"
)

// hostile is an instance label, alert name and GPU label as a hostile or
// intercepted Prometheus could answer them: a screen clear, a title set,
// a right-to-left override, a NUL and a line of its own.
const hostile = "spark\x1b[2J\x1b]0;pwned\x07\u202egnilttorhT\x00\x0b\nverdict: all fine"

// Strings from a server reach neither the terminal nor
// the SVG with what would act on them; control characters in the
// instance label leave the SVG valid XML.
func TestServerStringsAreStripped(t *testing.T) {
	start := time.Date(2025, 11, 24, 14, 0, 0, 0, time.UTC)
	r := Report{Source: "prometheus", Instance: hostile, GPU: 0, Start: start, End: start.Add(time.Hour),
		Verdict: "ok " + hostile, Alerts: []Alert{{Name: hostile, Severity: "warning", GPU: hostile, Start: start}}}
	var text bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"\x1b", "\x07", "\u202e", "\x00", "\x0b", "\nverdict: all fine"} {
		if strings.Contains(text.String(), bad) {
			t.Errorf("the text report carries %q:\n%s", bad, text.String())
		}
	}
	if !strings.Contains(text.String(), "spark[2J") {
		t.Errorf("the instance's printable text is gone:\n%s", text.String())
	}
	var svg bytes.Buffer
	if err := r.WriteSVG(&svg); err != nil {
		t.Fatal(err)
	}
	d := xml.NewDecoder(&svg)
	for {
		_, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the SVG is not XML: %v", err)
		}
	}
	if strings.Contains(svg.String(), "\u202e") {
		t.Error("the SVG carries a right-to-left override")
	}
}
