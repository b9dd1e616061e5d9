package redact

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRedactMakesPathsRelativeToTheMountPoint(t *testing.T) {
	for _, c := range []struct{ root, msg, want string }{
		{"/srv/x/proc", "open /srv/x/proc/meminfo: permission denied", "open meminfo: permission denied"},
		{"/srv/x/proc", "stat /srv/x/proc: no such file or directory", "stat .: no such file or directory"},
		{"/proc", "open /proc/pressure/memory: operation not supported", "open pressure/memory: operation not supported"},
		{"/", "open /meminfo: permission denied", "open /meminfo: permission denied"},
		{"", "open meminfo: permission denied", "open meminfo: permission denied"},
	} {
		if got := UnderRoots(c.msg, c.root); got != c.want {
			t.Errorf("root %q: %q, want %q", c.root, got, c.want)
		}
	}
}

// A path that another contains is replaced after it, whatever the order
// given.
func TestReplacePathsLongestFirst(t *testing.T) {
	msg := "open /etc/web.yml.d/cert.pem: see /etc/web.yml"
	renamings := []Renaming{{"/etc/web.yml", "the file"}, {"/etc/web.yml.d/cert.pem", "cert_file"}, {"", "nothing"}}
	if got, want := ReplacePaths(msg, renamings), "open cert_file: see the file"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
	if renamings[0].Name != "the file" {
		t.Error("the caller's renamings were reordered")
	}
}

func TestWithoutPath(t *testing.T) {
	_, err := os.ReadFile(filepath.Join(t.TempDir(), "secret", "missing"))
	for _, c := range []struct {
		name string
		got  error
		want string
	}{
		{"WithoutPath", WithoutPath(err), "no such file or directory"},
		{"OpWithoutPath", OpWithoutPath(err), "open: no such file or directory"},
	} {
		if c.got.Error() != c.want || strings.Contains(c.got.Error(), "secret") || !errors.Is(c.got, fs.ErrNotExist) {
			t.Errorf("%s: %v, want %q and fs.ErrNotExist", c.name, c.got, c.want)
		}
	}
	plain := errors.New("no path here")
	if WithoutPath(plain) != plain || OpWithoutPath(plain) != plain {
		t.Error("an error without a path was changed")
	}
}
