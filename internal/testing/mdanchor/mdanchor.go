// Package mdanchor lists the anchors GitHub gives the headings of a
// Markdown file, so that tests can check that a link such as a
// runbook_url's "#sparkoomkill" lands on a section.
package mdanchor

import (
	"bufio"
	"bytes"
	"strings"
	"unicode"
)

// Anchors returns the anchors of the headings of a Markdown document:
// lower case, punctuation dropped, spaces as hyphens. Lines in fenced code
// blocks are not headings.
func Anchors(markdown []byte) map[string]bool {
	anchors := map[string]bool{}
	inFence := false
	sc := bufio.NewScanner(bytes.NewReader(markdown))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
		}
		if inFence || !strings.HasPrefix(line, "#") {
			continue
		}
		anchors[Anchor(strings.TrimSpace(strings.TrimLeft(line, "#")))] = true
	}
	return anchors
}

// Anchor is the anchor GitHub gives a heading's text.
func Anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}
