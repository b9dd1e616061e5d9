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
)

// Root is the repository root, found from this file's package directory.
func Root(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}

var (
	buildOnce sync.Once
	binary    string
	buildErr  error
)

// Binary builds cmd/spark_exporter once per test process and returns its
// path. SPARK_TEST_BINARY names a prebuilt binary instead, such as the
// cross-built linux/arm64 one that `make test-arm64` runs under qemu.
func Binary(t testing.TB) string {
	t.Helper()
	if b := os.Getenv("SPARK_TEST_BINARY"); b != "" {
		return b
	}
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "spark_exporter-test-")
		if err != nil {
			buildErr = err
			return
		}
		binary = filepath.Join(dir, "spark_exporter")
		cmd := exec.Command("go", "build", "-o", binary, "./cmd/spark_exporter")
		cmd.Dir = Root(t)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1", "CGO_CFLAGS=-Wno-deprecated-declarations")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binary
}

// Process is a running exporter.
type Process struct {
	URL  string // http://127.0.0.1:PORT
	cmd  *exec.Cmd
	logs *syncBuffer
	done chan struct{}
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
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
	args = append([]string{"--web.listen-address=127.0.0.1:0"}, args...)
	// SPARK_TEST_EXEC_WRAPPER runs the binary through an emulator, e.g.
	// "qemu-aarch64 -L /usr/aarch64-linux-gnu" for the arm64 build.
	if wrapper := strings.Fields(os.Getenv("SPARK_TEST_EXEC_WRAPPER")); len(wrapper) > 0 {
		return StartProgram(t, wrapper[0], env, append(append(wrapper[1:], Binary(t)), args...)...)
	}
	return StartProgram(t, Binary(t), env, args...)
}

// StartProgram runs another program that logs "Listening on" the way
// exporter-toolkit does (Prometheus, Alertmanager), with args that make it
// listen on a loopback port, and stops it like Start.
func StartProgram(t testing.TB, path string, env []string, args ...string) *Process {
	t.Helper()
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &Process{cmd: cmd, logs: &syncBuffer{}, done: make(chan struct{})}
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
