// Package testexporter builds the spark_exporter binary once per test
// process and runs it on loopback, for tests that check the program a user
// runs rather than its packages.
package testexporter

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/testing/standin"
)

// Root is the repository root: the exporter's module directory, also from
// a tools module that replaces the exporter with its checkout.
func Root(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/spark-exporter/spark_exporter").Output()
	if err != nil {
		t.Fatalf("go list -m: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// once builds something once per test process, into a temporary
// directory of its own, and gives every caller the same path or error.
type once struct {
	sync.Once
	path string
	err  error
}

func (o *once) build(t testing.TB, prefix string, build func(dir string) (string, error)) string {
	t.Helper()
	o.Do(func() {
		dir, err := os.MkdirTemp("", prefix)
		if err != nil {
			o.err = err
			return
		}
		o.path, o.err = build(dir)
	})
	if o.err != nil {
		t.Fatal(o.err)
	}
	return o.path
}

var binary, standInLib, fakeEngine once

// Binary builds cmd/spark_exporter once per test process and returns its
// path. SPARK_TEST_BINARY names a prebuilt binary instead, such as the
// cross-built linux/arm64 one that `make test-arm64` runs under qemu.
func Binary(t testing.TB) string {
	t.Helper()
	if b := os.Getenv("SPARK_TEST_BINARY"); b != "" {
		return b
	}
	root := Root(t)
	return binary.build(t, "spark_exporter-test-", func(dir string) (string, error) {
		path := filepath.Join(dir, "spark_exporter")
		cmd := exec.Command("go", "build", "-o", path, "./cmd/spark_exporter")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1", "CGO_CFLAGS=-O2 -g -Wno-deprecated-declarations")
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("go build: %v\n%s", err, out)
		}
		return path, nil
	})
}

// FakeEngine builds tools/fakeengine once per test process and returns its
// path: an engine's stand-in to run as a process of its own, under an
// engine's name.
func FakeEngine(t testing.TB) string {
	t.Helper()
	root := Root(t)
	return fakeEngine.build(t, "fakeengine-", func(dir string) (string, error) {
		path := filepath.Join(dir, "fakeengine")
		cmd := exec.Command("go", "build", "-o", path, "./tools/fakeengine")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("go build: %v\n%s", err, out)
		}
		return path, nil
	})
}

// StandInNVML builds the GB10 stand-in libnvidia-ml.so.1 once per test
// process and returns its path, for --gpu.nvml-library. Its scenario comes
// from SPARK_NVML_SCENARIO in the exporter's environment (see Scenario and
// docs/standin-nvml.md). SPARK_TEST_NVML names a prebuilt one instead, such
// as the arm64 build that `make test-arm64` loads into the arm64 binary.
func StandInNVML(t testing.TB) string {
	t.Helper()
	if lib := os.Getenv("SPARK_TEST_NVML"); lib != "" {
		return lib
	}
	root := Root(t)
	return standInLib.build(t, "nvml-standin-", func(dir string) (string, error) {
		return standin.Build(root, dir)
	})
}

// Scenario is the path of a stand-in scenario in testdata/nvml/scenarios,
// by name (gb10-idle, gb10-throttle, …).
func Scenario(t testing.TB, name string) string {
	t.Helper()
	path := filepath.Join(Root(t), "testdata", "nvml", "scenarios", name+".scenario")
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// Process is a running exporter.
type Process struct {
	URL  string // http://127.0.0.1:PORT
	cmd  *exec.Cmd
	logs *SyncBuffer
	done chan struct{}
}

// SyncBuffer collects a log written from several goroutines and reads it
// back safely.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// The exporter-toolkit line; Prometheus puts component=web before the
// address.
var listening = regexp.MustCompile(`msg="?Listening on"?(?: \S+)*? address=(\S+)`)

// Start runs the exporter with args on an ephemeral loopback port and waits
// until it says where it listens. The process is stopped with SIGTERM when
// the test ends; its log is printed if the test failed.
func Start(t testing.TB, env []string, args ...string) *Process {
	t.Helper()
	argv := commandLine(t, append([]string{"--web.listen-address=127.0.0.1:0"}, args...))
	return StartProgram(t, argv[0], env, argv[1:]...)
}

// Command returns the exporter binary as a command with args, for tests of
// commands that exit (plan, --version, bad flags).
func Command(t testing.TB, args ...string) *exec.Cmd {
	t.Helper()
	argv := commandLine(t, args)
	return exec.Command(argv[0], argv[1:]...)
}

// commandLine is the binary and args, behind SPARK_TEST_EXEC_WRAPPER if set:
// an emulator such as "qemu-aarch64 -L /usr/aarch64-linux-gnu" for the
// arm64 build.
func commandLine(t testing.TB, args []string) []string {
	wrapper := strings.Fields(os.Getenv("SPARK_TEST_EXEC_WRAPPER"))
	return append(append(wrapper, Binary(t)), args...)
}

// StartProgram runs another program that logs "Listening on" the way
// exporter-toolkit does (Prometheus, Alertmanager), with args that make it
// listen on a loopback port, and stops it like Start.
func StartProgram(t testing.TB, path string, env []string, args ...string) *Process {
	t.Helper()
	return StartCommand(t, exec.Command(path, args...), env)
}

// StartCommand is StartProgram for a command the caller prepared (to run
// it as another user, say); env is added to the test's environment.
func StartCommand(t testing.TB, cmd *exec.Cmd, env []string) *Process {
	t.Helper()
	path := cmd.Path
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &Process{cmd: cmd, logs: &SyncBuffer{}, done: make(chan struct{})}
	cmd.Stdout = p.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}

	addr := make(chan string, 1)
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(p.logs, line)
			if m := listening.FindStringSubmatch(line); m != nil {
				select {
				case addr <- m[1]:
				default:
				}
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	t.Cleanup(func() {
		p.Stop(t)
		if t.Failed() {
			t.Logf("%s log:\n%s", filepath.Base(path), p.logs.String())
		}
	})

	select {
	case a := <-addr:
		p.URL = "http://" + a
	case <-p.done:
		cmd.Wait()
		t.Fatalf("%s exited before listening: %v\n%s", filepath.Base(path), cmd.ProcessState, p.logs.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not listen within 30s:\n%s", filepath.Base(path), p.logs.String())
	}
	return p
}

// Stop sends SIGTERM and waits for the process to exit; it returns the exit
// status. Calling it again is harmless.
func (p *Process) Stop(t testing.TB) int {
	t.Helper()
	if p.cmd.ProcessState == nil {
		p.cmd.Process.Signal(syscall.SIGTERM)
		<-p.done
		p.cmd.Wait()
	}
	return p.cmd.ProcessState.ExitCode()
}

// PID is the process's id, for tests that watch its resources.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Logs returns everything the process wrote so far.
func (p *Process) Logs() string { return p.logs.String() }

// WaitLog waits until the process has logged a line containing text, and
// fails the test if it has not within 30 seconds. A log line is written
// before the response it concerns is sent, but read through a pipe: a
// test that checks the log right after a request would race.
func (p *Process) WaitLog(t testing.TB, text string) {
	t.Helper()
	Eventually(t, 30*time.Second, func() bool { return strings.Contains(p.Logs(), text) },
		"the log to contain %q", text)
}

// Eventually polls cond until it holds, failing the test with the
// description if it does not within timeout. It is how tests wait for a
// running program: a condition, never a fixed sleep.
func Eventually(t testing.TB, timeout time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for "+format, append([]any{timeout}, args...)...)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Get fetches path and returns the body, failing the test on a non-200.
func (p *Process) Get(t testing.TB, path string) string {
	t.Helper()
	resp, err := http.Get(p.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s\n%s", path, resp.Status, body)
	}
	return string(body)
}

// CopyTree copies a fixture tree (files and directories; nothing else) into
// a temporary directory, for a test that damages it or makes it change
// while the exporter reads it.
func CopyTree(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.Walk(src, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		if info.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// Tool returns the path of a tool built from the tools modules (promtool,
// prometheus, alertmanager, amtool) under .build/tools. Without it the test
// is skipped, unless SPARK_REQUIRE_TOOLS=1 (set by `make test` and CI), where
// a missing tool is a failure.
func Tool(t testing.TB, name string) string {
	t.Helper()
	path := filepath.Join(Root(t), ".build", "tools", name)
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("SPARK_REQUIRE_TOOLS") == "1" {
			t.Fatalf("%s not built: run `make tools` (%v)", name, err)
		}
		t.Skipf("%s not built; `make tools` builds it", name)
	}
	return path
}
