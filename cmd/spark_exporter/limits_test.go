package main

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/testing/fakeproc"
	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
)

// Issue 28: what runs out — descriptors, connections — under a bounded
// exporter.

// startLimited starts the exporter under prlimit with at most files
// descriptors (soft and hard: Go raises the soft limit to the hard one).
func startLimited(t *testing.T, files int, args ...string) *testexporter.Process {
	t.Helper()
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skip("no prlimit (util-linux):", err)
	}
	limit := "--nofile=" + strconv.Itoa(files) + ":" + strconv.Itoa(files)
	argv := append(strings.Fields(os.Getenv("SPARK_TEST_EXEC_WRAPPER")), testexporter.Binary(t), "--web.listen-address=127.0.0.1:0")
	return testexporter.StartCommand(t, exec.Command(prlimit, append(append([]string{limit, "--"}, argv...), args...)...), nil)
}

// Issue 28, item 1: 3,000 processes under a 1,024-descriptor limit. The
// scan rereads every known process's stat in one batch; the batch holds
// no more descriptors than its budget, so every scrape sees every
// process: the inference count holds, nothing reads as unreadable, and
// the collector succeeds.
func TestWorkloadsScanUnderADescriptorLimit(t *testing.T) {
	procs := fakeproc.Busy(3000)
	want := 0
	for _, p := range procs {
		if p.Comm == "vllm" {
			want++
		}
	}
	root := fakeproc.WriteTree(t, procs...)
	p := startLimited(t, 1024, "--path.procfs="+root, "--path.sysfs="+sysFixture(t, "spark"), noGPU,
		"--no-collector.thermal", "--collector.workloads")
	for scrape := range 6 {
		m := boundedGet(t, p, "/metrics?collect[]=workloads")
		inference, _ := testexporter.Value(m, `spark_workloads{role="inference"}`)
		unreadable, _ := testexporter.Value(m, "spark_workload_unreadable_processes")
		if success(m, "workloads") != 1 || int(inference) != want || unreadable != 0 {
			t.Errorf("scrape %d: success %v, %v inference servers (want %d), %v unreadable",
				scrape, success(m, "workloads"), inference, want, unreadable)
		}
	}
	if strings.Contains(p.Logs(), "too many open files") {
		t.Errorf("the exporter ran out of descriptors:\n%s", p.Logs())
	}
}

// Issue 28, item 2: 5,000 thermal zones under a 1,024-descriptor limit.
// The platform collector reports at most 256 values (the spbm driver's
// first, then the zones by index), counts the rest in
// spark_scrape_collector_entries_left_out and names the first at debug
// level; the pool collector, which opens meminfo at every scrape, still
// has its descriptors. Values no sensor reads are absent and counted;
// a right-to-left override in the BIOS version reaches no label.
func TestPlatformCapsItsEntries(t *testing.T) {
	sys := testexporter.CopyTree(t, sysFixture(t, "spark"))
	write := func(name, data string) {
		t.Helper()
		path := filepath.Join(sys, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const zones = 5000
	for i := 7; i < zones; i++ {
		dir := "class/thermal/thermal_zone" + strconv.Itoa(i) + "/"
		write(dir+"type", "fake\n")
		write(dir+"temp", "40000\n")
	}
	write("class/thermal/thermal_zone0/temp", "-273150\n")             // absolute zero: an error code
	write("class/thermal/thermal_zone1/temp", "9223372036854775807\n") // 9.2e15 °C
	write("class/hwmon/hwmon1/power7_input", "18446744073709551615\n") // 1.8e13 W
	write("class/dmi/id/bios_version", "5.36\u202e810MUCA0_\n")        // reads backwards
	p := startLimited(t, 1024, "--path.procfs="+fixtureDir(t, "spark"), "--path.sysfs="+sys, noGPU,
		"--no-collector.thermal", "--log.level=debug")
	for range 3 {
		m := boundedGet(t, p, "/metrics")
		temps := strings.Count(m, "\nspark_platform_temperature_celsius{")
		left, _ := testexporter.Value(m, `spark_scrape_collector_entries_left_out{collector="platform"}`)
		unreadable, _ := testexporter.Value(m, "spark_platform_unreadable_files")
		if success(m, "platform") != 1 || success(m, "pool") != 1 || temps > 256 || int(left) != zones-(256-32) {
			t.Errorf("platform success %v, pool %v, %d temperature series, %v left out (want %d)",
				success(m, "platform"), success(m, "pool"), temps, left, zones-(256-32))
		}
		for _, absent := range []string{`sensor="TSOC"`, `sensor="TS0E"`, `rail="dc_input"`, "\u202e", "810MUCA0"} {
			if strings.Contains(m, absent) {
				t.Errorf("/metrics carries %q", absent)
			}
		}
		if unreadable < 4 {
			t.Errorf("%v files unreadable, want the two zones, the rail and the BIOS version", unreadable)
		}
	}
	p.WaitLog(t, "first=class/thermal/thermal_zone224/temp")
	if strings.Contains(p.Logs(), "too many open files") {
		t.Errorf("the exporter ran out of descriptors:\n%s", p.Logs())
	}
}

// Issue 28, item 12: 200 connections that never finish their headers
// (they used to hold every slot until --web.read-timeout, 10 s, so a new
// scrape timed out) do not keep a new scrape out: it is answered within
// 8 s, the stalled ones closed to make room, and the exporter never holds
// more than --web.max-connections of them.
func TestStalledConnectionsDoNotLockOutScrapes(t *testing.T) {
	p := testexporter.Start(t, nil, "--path.procfs="+fixtureDir(t, "spark"), noGPU, "--no-collector.thermal")
	addr := strings.TrimPrefix(p.URL, "http://")
	client := &http.Client{Timeout: 8 * time.Second}
	// The value files a scrape reads stay open from one scrape to the
	// next: they are counted before the stalled connections.
	scrapePool := func() {
		t.Helper()
		resp, err := client.Get(p.URL + "/metrics?collect[]=pool")
		if err != nil {
			t.Fatalf("a scrape beside 200 stalled connections: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("a scrape beside 200 stalled connections: %s", resp.Status)
		}
	}
	scrapePool()
	before := openFiles(t, p.PID())
	for range 200 {
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.Write([]byte("GET /metrics HTTP/1.1\r\nHost: te"))
	}
	scrapePool()
	if n := openFiles(t, p.PID()); n > before+64+2 {
		t.Errorf("%d descriptors open, %d before 200 stalled connections: more than --web.max-connections held", n, before)
	}
}

// openFiles counts the descriptors the process pid has open.
func openFiles(t *testing.T, pid int) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// Issue 28, item 13: SIGHUP (a closed terminal, a reload habit) used to
// kill the exporter silently, exit 129. It is logged, the exporter goes on
// serving, and SIGTERM still ends it with status 0.
func TestSIGHUPIsLoggedAndServingGoesOn(t *testing.T) {
	p := testexporter.Start(t, nil, "--path.procfs="+fixtureDir(t, "spark"), noGPU, "--no-collector.thermal")
	for range 2 {
		if err := syscall.Kill(p.PID(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		p.WaitLog(t, "SIGHUP received")
		if m := boundedGet(t, p, "/metrics?collect[]=pool"); success(m, "pool") != 1 {
			t.Errorf("after SIGHUP: pool success %v", success(m, "pool"))
		}
	}
	if code := p.Stop(t); code != 0 {
		t.Errorf("SIGTERM after SIGHUP: exit %d, want 0", code)
	}
}

// Issue 28, item 11: python3 launcher.py execs python3 -m vllm.entrypoints…: same
// pid, start time and comm. The next scrape reports the inference server,
// and the exec back drops it.
func TestExecUnderTheSameNameIsSeen(t *testing.T) {
	launcher := fakeproc.Process{PID: 2600, PPID: 1, Comm: "python3", Start: 4900000, RSSKB: 1 << 20,
		Argv: []string{"/usr/bin/python3", "launcher.py"}}
	root := fakeproc.WriteTree(t, fakeproc.Init, fakeproc.Kthreadd, launcher)
	p := testexporter.Start(t, nil, "--path.procfs="+root, noGPU, "--no-collector.thermal")
	inference := func() float64 {
		v, _ := testexporter.Value(boundedGet(t, p, "/metrics?collect[]=workloads"), `spark_workloads{role="inference"}`)
		return v
	}
	if n := inference(); n != 0 {
		t.Fatalf("the launcher: %v inference servers", n)
	}
	server := launcher
	server.Argv = []string{"/usr/bin/python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "Qwen/Qwen3-8B"}
	server.Write(t, root)
	if n := inference(); n != 1 {
		t.Errorf("after the exec into vllm serve: %v inference servers, want 1", n)
	}
	launcher.Write(t, root)
	if n := inference(); n != 0 {
		t.Errorf("after the exec back: %v inference servers, want 0", n)
	}
}
