package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestBadFlagsExitTwoNamingTheFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--pool.reserve=lots"}, "--pool.reserve"},
		{[]string{"--web.max-requests=-3"}, "--web.max-requests"},
		{[]string{"--log.level=loud"}, "log.level"},
		{[]string{"--workloads.match=training:x:(unclosed"}, "for flag --workloads.match: bad regular expression"},
		{[]string{"--workloads.match=training:x:ok", "--workloads.match=server:x:y"}, "for flag --workloads.match: role must be"},
		{[]string{"--no-such-flag"}, "unknown long flag '--no-such-flag'"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(tc.args, &stdout, &stderr); code != 2 {
			t.Errorf("%v: exit %d, want 2", tc.args, code)
		}
		if !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: stderr %q does not name %q", tc.args, stderr.String(), tc.want)
		}
	}
}

func TestVersionAndHelpExitZero(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"--help"}} {
		var stdout, stderr bytes.Buffer
		if code := run(args, &stdout, &stderr); code != 0 {
			t.Errorf("%v: exit %d, want 0; stderr: %s", args, code, stderr.String())
		}
		if !strings.Contains(stdout.String()+stderr.String(), name) {
			t.Errorf("%v printed nothing about %s", args, name)
		}
	}
}
