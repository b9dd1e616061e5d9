package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/spark-exporter/spark_exporter/internal/testing/otheruser"
	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
)

// The workloads of the host's /proc, each scrape, to the exporter run as
// root and as nobody (as the .deb runs it, where stat hides arg_start and
// the kernel's CPU clock, not schedstat, tells what ran): an engine started
// just before a scrape is in it, one that exited is gone from the next, and
// a process seen before that execs into an engine is in the next.
func TestScanSeesEachScrapesEngines(t *testing.T) {
	for _, user := range []string{"root", "nobody"} {
		t.Run(user, func(t *testing.T) {
			scanSeesEachScrapesEngines(t, startAs(t, user == "nobody", noGPU, "--web.disable-exporter-metrics"))
		})
	}
}

func scanSeesEachScrapesEngines(t *testing.T, p *testexporter.Process) {
	engine := vllmEngine(t)
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

	pid, execEngine := shellThatExecs(t, engine)
	if inScrape(pid) {
		t.Fatal("the shell is taken for an engine before its exec")
	}
	inScrape(pid) // seen twice: what is remembered of it is steady
	execEngine()
	if !inScrape(pid) {
		t.Error("a process seen before that execs into an engine is not in the next scrape")
	}
}

// startAs starts a copy of the built binary with args, as nobody when
// asNobody (the copy where nobody may run it).
func startAs(t testing.TB, asNobody bool, args ...string) *testexporter.Process {
	t.Helper()
	args = append([]string{"--web.listen-address=127.0.0.1:0"}, args...)
	if !asNobody {
		return testexporter.StartProgram(t, testexporter.Binary(t), nil, args...)
	}
	bin := filepath.Join(otheruser.Dir(t), "spark_exporter")
	copyProgram(t, testexporter.Binary(t), bin)
	return testexporter.StartCommand(t, otheruser.Command(t, bin, args...), nil)
}

// A process seen idle in a cgroup of its own, moved to another cgroup,
// that execs into an engine there: its first cgroup shows no CPU time, and
// it is still in the next scrape.
func TestScanSeesAnEngineMovedToAnotherCgroup(t *testing.T) {
	engine := vllmEngine(t)
	from, to := newCgroup(t), newCgroup(t)
	p := testexporter.Start(t, nil, noGPU, "--web.disable-exporter-metrics")
	pid, execEngine := shellThatExecs(t, engine)
	moveToCgroup(t, from, pid)
	for range 4 { // long enough idle to be taken as unchanged
		if engineInScrape(t, p, pid) {
			t.Fatal("the shell is taken for an engine before its exec")
		}
	}
	moveToCgroup(t, to, pid)
	execEngine()
	if !engineInScrape(t, p, pid) {
		t.Error("a process moved to another cgroup that execs into an engine there is not in the next scrape")
	}
}

func engineInScrape(t *testing.T, p *testexporter.Process, pid int) bool {
	for line := range strings.Lines(p.Get(t, "/metrics")) {
		if strings.HasPrefix(line, "spark_workload_info{") && strings.Contains(line, `kind="vllm"`) &&
			strings.Contains(line, fmt.Sprintf(`pid="%d"`, pid)) {
			return true
		}
	}
	return false
}

// newCgroup makes a cgroup v2 directory of its own, removed at the end
// (after the cleanups registered later, which kill its processes); the
// test is skipped where cgroup v2 is not mounted or not writable.
func newCgroup(tb testing.TB) string {
	tb.Helper()
	mountinfo, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		tb.Skip(err)
	}
	root := ""
	for line := range strings.Lines(string(mountinfo)) {
		pre, post, _ := strings.Cut(line, " - ")
		if f := strings.Fields(pre); strings.HasPrefix(post, "cgroup2 ") && len(f) >= 5 && f[3] == "/" {
			root = f[4]
			break
		}
	}
	if root == "" {
		tb.Skip("no cgroup v2 mount")
	}
	dir, err := os.MkdirTemp(root, "spark-exporter-test-")
	if err != nil {
		tb.Skipf("cannot make a cgroup: %v", err)
	}
	// As systemd makes them: an unprivileged exporter reads them.
	if err := os.Chmod(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := os.Remove(dir); err != nil {
			tb.Errorf("removing the test's cgroup: %v", err)
		}
	})
	return dir
}

func moveToCgroup(tb testing.TB, dir string, pid int) {
	tb.Helper()
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
		tb.Fatalf("moving a process to a cgroup: %v", err)
	}
}

// vllmEngine is the fake engine copied to a file named vllm.
func vllmEngine(t testing.TB) string {
	engine := filepath.Join(t.TempDir(), "vllm")
	data, err := os.ReadFile(testexporter.FakeEngine(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(engine, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return engine
}

// shellThatExecs starts a shell that waits, and returns its pid and a
// function that has it exec into engine and waits for the exec.
func shellThatExecs(t *testing.T, engine string) (int, func()) {
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
	return pid, func() {
		stdin.Write([]byte("go\n"))
		cmdline := filepath.Join("/proc", strconv.Itoa(pid), "cmdline")
		testexporter.Eventually(t, 30*1e9, func() bool {
			data, _ := os.ReadFile(cmdline)
			return strings.HasPrefix(string(data), engine+"\x00serve")
		}, "the shell's exec")
	}
}
