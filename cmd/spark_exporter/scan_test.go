package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
)

// The workloads of the host's /proc, each scrape: an engine started just
// before a scrape is in it, one that exited is gone from the next, and a
// process seen before that execs into an engine is in the next.
func TestScanSeesEachScrapesEngines(t *testing.T) {
	engine := filepath.Join(t.TempDir(), "vllm")
	data, err := os.ReadFile(testexporter.FakeEngine(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(engine, data, 0o755); err != nil {
		t.Fatal(err)
	}
	p := testexporter.Start(t, nil, noGPU, "--web.disable-exporter-metrics")
	p.Get(t, "/metrics")
	inScrape := func(pid int) bool {
		for line := range strings.Lines(p.Get(t, "/metrics")) {
			if strings.HasPrefix(line, "spark_workload_info{") && strings.Contains(line, `kind="vllm"`) &&
				strings.Contains(line, fmt.Sprintf(`pid="%d"`, pid)) {
				return true
			}
		}
		return false
	}

	started := exec.Command(engine, "serve", "--port", "1")
	started.Env = append(os.Environ(), "FAKEENGINE_LISTEN=no")
	if err := started.Start(); err != nil {
		t.Fatal(err)
	}
	if !inScrape(started.Process.Pid) {
		t.Error("an engine started just before a scrape is not in it")
	}
	started.Process.Kill()
	started.Wait()
	if inScrape(started.Process.Pid) {
		t.Error("an engine that exited is still in the next scrape")
	}

	shell := exec.Command("sh", "-c", `read line; exec "$ENGINE" serve --port 1`)
	shell.Env = append(os.Environ(), "FAKEENGINE_LISTEN=no", "ENGINE="+engine)
	stdin, err := shell.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := shell.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { shell.Process.Kill(); shell.Wait() })
	pid := shell.Process.Pid
	if inScrape(pid) {
		t.Fatal("the shell is taken for an engine before its exec")
	}
	inScrape(pid) // seen twice: what is remembered of it is steady
	stdin.Write([]byte("go\n"))
	cmdline := filepath.Join("/proc", strconv.Itoa(pid), "cmdline")
	testexporter.Eventually(t, 30*1e9, func() bool {
		data, _ := os.ReadFile(cmdline)
		return strings.HasPrefix(string(data), engine+"\x00serve")
	}, "the shell's exec")
	if !inScrape(pid) {
		t.Error("a process seen before that execs into an engine is not in the next scrape")
	}
}
