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

	"github.com/spark-exporter/spark_exporter/internal/standin"
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

var binary, standInLib once

// Binary builds cmd/spark_exporter once per test process and returns its
// path.
func Binary(t testing.TB) string {
	t.Helper()
	root := Root(t)
	return binary.build(t, "spark_exporter-test-", func(dir string) (string, error) {
		path := filepath.Join(dir, "spark_exporter")
		cmd := exec.Command("go", "build", "-o", path, "./cmd/spark_exporter")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1", "CGO_CFLAGS=-Wno-deprecated-declarations")
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("go build: %v\n%s", err, out)
		}
		return path, nil
	})
}

// StandInNVML builds the GB10 stand-in libnvidia-ml.so.1 once per test
// process and returns its path, for --gpu.nvml-library. Its scenario comes
// from SPARK_NVML_SCENARIO in the exporter's environment (see Scenario and
// docs/standin-nvml.md).
func StandInNVML(t testing.TB) string {
	t.Helper()
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

var listening = regexp.MustCompile(`msg="?Listening on"? address=(\S+)`)

// Start runs the exporter with args on an ephemeral loopback port and waits
// until it says where it listens. The process is stopped with SIGTERM when
// the test ends; its log is printed if the test failed.
func Start(t testing.TB, env []string, args ...string) *Process {
	t.Helper()
	args = append([]string{"--web.listen-address=127.0.0.1:0"}, args...)
	cmd := exec.Command(Binary(t), args...)
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
			t.Logf("exporter log:\n%s", p.logs.String())
		}
	})

	select {
	case a := <-addr:
		p.URL = "http://" + a
	case <-p.done:
		cmd.Wait()
		t.Fatalf("exporter exited before listening: %v\n%s", cmd.ProcessState, p.logs.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("exporter did not listen within 30s:\n%s", p.logs.String())
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
