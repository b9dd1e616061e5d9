// Package otheruser runs a test's attacker as a second user of the box:
// `nobody` through setpriv(1), as an agent, a notebook or a model's own code
// would run beside the exporter. Tests are root here; a test that needs a
// second user and is not root skips (fails under SPARK_REQUIRE_PACKAGES).
package otheruser

import (
	"os"
	"os/exec"
	"testing"
)

// UID and GID are nobody's and nogroup's on Debian and Ubuntu.
const (
	UID = 65534
	GID = 65534
)

// Require skips (or, in CI, fails) a test that cannot switch users.
func Require(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("SPARK_REQUIRE_PACKAGES") != "" {
			t.Fatal("this test runs its attacker as nobody and needs root to do so")
		}
		t.Skip("runs its attacker as nobody: needs root")
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Fatalf("setpriv (util-linux) is missing: %v", err)
	}
}

// Command is name with args run as nobody, with no supplementary groups
// and no inherited capabilities.
func Command(t testing.TB, name string, args ...string) *exec.Cmd {
	t.Helper()
	Require(t)
	full := append([]string{"--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", "--", name}, args...)
	return exec.Command("setpriv", full...)
}

// Dir is a fresh directory that nobody may enter and write, like /tmp, with
// the sticky bit: the place another user plants a file or a link. t.TempDir's
// own parents are 0700, so the directory is made under os.TempDir.
func Dir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "otheruser-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}
