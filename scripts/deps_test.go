// Package scripts_test runs scripts/deps.sh on an emulated machine: stand-in
// dpkg-query, apt-get, dpkg-deb, id and go first on PATH, so that a fresh
// machine with only Go, gcc and apt, root or not, can be played here
// without installing or removing anything on the host.
package scripts_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Every package deps.sh must ask for on a bare amd64 machine.
var amd64Packages = []string{
	"make", "git", "gcc", "lintian", "adduser", "curl", "binutils", "systemd", "systemd-journal-remote", "chromium", "fonts-dejavu-core",
	"gcc-aarch64-linux-gnu", "libc6-dev-arm64-cross", "qemu-user",
}

type machine struct {
	arch      string   // what `go env GOARCH` says
	uid       string   // what `id -u` says
	installed []string // the packages dpkg-query reports installed
	promtool2 bool     // a Prometheus 2 promtool at $SPARK_PROMTOOL2
	env       []string
}

type result struct {
	code   int
	stdout string
	stderr string
	apt    []string // every apt-get call, as its arguments
	repo   string   // the copy of the repository deps.sh ran in
}

// stub writes an executable shell script.
func stub(t *testing.T, dir, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

func (m machine) run(t *testing.T) result {
	t.Helper()
	tmp := t.TempDir()
	repo := filepath.Join(tmp, "repo")
	bin := filepath.Join(tmp, "bin")
	for _, d := range []string{filepath.Join(repo, "scripts"), bin} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	script, err := os.ReadFile("deps.sh")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "scripts", "deps.sh"), script, 0o755); err != nil {
		t.Fatal(err)
	}
	installed := filepath.Join(tmp, "installed")
	if err := os.WriteFile(installed, []byte(strings.Join(m.installed, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	aptLog := filepath.Join(tmp, "apt.log")
	stub(t, bin, "go", `[ "$*" = "env GOARCH" ] && echo `+m.arch)
	stub(t, bin, "id", `[ "$*" = "-u" ] && echo `+m.uid)
	// dpkg-query -W -f FORMAT PACKAGE
	stub(t, bin, "dpkg-query", `grep -qx "$4" `+installed+` && printf installed || exit 1`)
	// apt-get download leaves a .deb in the working directory.
	stub(t, bin, "apt-get", `echo "$*" >>`+aptLog+`
case "$*" in *download*prometheus*) : >prometheus_2.42.0+ds-5_`+m.arch+`.deb ;; esac`)
	// dpkg-deb -x DEB DIR: Debian's promtool 2.
	stub(t, bin, "dpkg-deb", `mkdir -p "$3/usr/bin" && printf '#!/bin/sh\necho "promtool, version 2.42.0+ds"\n' >"$3/usr/bin/promtool" && chmod +x "$3/usr/bin/promtool"`)

	promtool2 := filepath.Join(tmp, "no-promtool")
	if m.promtool2 {
		promtool2 = filepath.Join(bin, "promtool2")
		stub(t, bin, "promtool2", `echo "promtool, version 2.42.0+ds"`)
	}

	cmd := exec.Command("bash", filepath.Join(repo, "scripts", "deps.sh"))
	cmd.Env = append([]string{"PATH=" + bin + ":/usr/bin:/bin", "SPARK_PROMTOOL2=" + promtool2}, m.env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String(), repo: repo}
	if exit, ok := err.(*exec.ExitError); ok {
		r.code = exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(aptLog); err == nil {
		r.apt = strings.Split(strings.TrimSpace(string(data)), "\n")
	}
	return r
}

// On a fresh machine, as root (CI): every package installed with one
// apt-get call, one line printed per package, and Debian's promtool 2
// unpacked into .build/debian without installing the prometheus package.
func TestDepsInstallsWhatIsMissingAsRoot(t *testing.T) {
	r := machine{arch: "amd64", uid: "0"}.run(t)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	var want []string
	for _, p := range amd64Packages {
		want = append(want, "deps: installing "+p)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		if strings.HasPrefix(line, "deps: installing ") {
			got = append(got, line)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("printed\n%s\nwant one line per package:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	install := "install -y -qq --no-install-recommends " + strings.Join(amd64Packages, " ")
	if !slices.Contains(r.apt, install) {
		t.Errorf("apt-get calls %q lack %q", r.apt, install)
	}
	for _, call := range r.apt {
		if strings.HasPrefix(call, "install") && strings.Contains(call, "prometheus") {
			t.Errorf("apt-get %s: the prometheus package would start a server; only its promtool is wanted", call)
		}
	}
	if _, err := os.Stat(filepath.Join(r.repo, ".build", "debian", "usr", "bin", "promtool")); err != nil {
		t.Errorf("Debian's promtool not unpacked into .build/debian: %v\n%s", err, r.stdout)
	}
}

// Not root: nothing installed, one line saying what to run first, and a
// failure, so that `make test` stops before tests that would fail.
func TestDepsSaysWhatToRunWhenNotRoot(t *testing.T) {
	r := machine{arch: "amd64", uid: "1000", installed: []string{"git", "gcc", "curl"}}.run(t)
	if r.code == 0 {
		t.Fatalf("exit 0 with packages missing and no root\n%s%s", r.stdout, r.stderr)
	}
	if len(r.apt) != 0 {
		t.Errorf("apt-get called as a user: %q", r.apt)
	}
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	if len(lines) != 1 {
		t.Fatalf("want one line, got:\n%s", r.stderr)
	}
	var missing []string
	for _, p := range amd64Packages {
		if p != "git" && p != "gcc" && p != "curl" {
			missing = append(missing, p)
		}
	}
	if want := "sudo apt-get install --no-install-recommends " + strings.Join(missing, " ") + " "; !strings.Contains(lines[0]+" ", want) {
		t.Errorf("the line\n%s\nlacks the command to run:\n%s", lines[0], want)
	}
}

// SPARK_DEPS=optional, not root: one line naming what is missing and what
// skips, and the suite goes on.
func TestDepsOptionalGoesOn(t *testing.T) {
	r := machine{arch: "amd64", uid: "1000", promtool2: true, installed: []string{"git", "gcc"},
		env: []string{"SPARK_DEPS=optional"}}.run(t)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if len(r.apt) != 0 {
		t.Errorf("apt-get called as a user: %q", r.apt)
	}
	if lines := strings.Split(strings.TrimSpace(r.stderr), "\n"); len(lines) != 1 || !strings.Contains(lines[0], "skip") ||
		!strings.Contains(lines[0], "chromium") {
		t.Errorf("want one line naming the missing packages and the skip, got:\n%s", r.stderr)
	}
}

// Everything there (a warm arm64 machine, which needs the amd64 cross
// compiler and no qemu): silent, and apt-get never runs.
func TestDepsQuietWhenNothingIsMissing(t *testing.T) {
	r := machine{arch: "arm64", uid: "0", promtool2: true, installed: []string{
		"make", "git", "gcc", "lintian", "adduser", "curl", "binutils", "systemd", "systemd-journal-remote", "chromium", "fonts-dejavu-core",
		"gcc-x86-64-linux-gnu", "libc6-dev-amd64-cross",
	}}.run(t)
	if r.code != 0 || r.stdout != "" || r.stderr != "" || len(r.apt) != 0 {
		t.Errorf("exit %d, apt-get %q, output:\n%s%s", r.code, r.apt, r.stdout, r.stderr)
	}
}

// CI runs the README's test command and installs nothing of its own: the
// package list is deps.sh's alone (which .ci/run may call to get make).
func TestCIRunsTheReadmeCommand(t *testing.T) {
	ci, err := os.ReadFile("../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), "\nmake test ") {
		t.Fatal("README.md no longer shows `make test`")
	}
	var commands []string
	for _, line := range strings.Split(string(ci), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		commands = append(commands, line)
		for _, word := range []string{"apt-get", "apt ", "dpkg", "install"} {
			if strings.Contains(line, word) {
				t.Errorf(".ci/run installs on its own (%s): %s", word, line)
			}
		}
	}
	if len(commands) == 0 || commands[len(commands)-1] != "make test" {
		t.Errorf(".ci/run's last command is not the README's `make test`: %q", commands)
	}
}
