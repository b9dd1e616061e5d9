package main

import (
	"bufio"
	"context"
	"errors"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
)

// A process stuck in uninterruptible sleep blocks a read of its /proc
// files (the read takes its memory-map lock). A named pipe in a copy of
// the fixture tree blocks the same way: opening it waits for a writer.

// blockedTree copies the Spark /proc and makes each of names a named pipe.
func blockedTree(t *testing.T, names ...string) string {
	t.Helper()
	dir := testexporter.CopyTree(t, fixtureDir(t, "spark"))
	for _, name := range names {
		path := filepath.Join(dir, name)
		os.Remove(path)
		if err := syscall.Mkfifo(path, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// success reads spark_scrape_collector_success of a collector; -1 when
// absent.
func success(metrics, collector string) float64 {
	v, ok := testexporter.Value(metrics, `spark_scrape_collector_success{collector="`+collector+`"}`)
	if !ok {
		return -1
	}
	return v
}

// threads is the exporter's thread count, from its /proc status.
func threads(t *testing.T, pid int) int {
	t.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(rest))
			return n
		}
	}
	t.Fatal("no Threads line")
	return 0
}

// Issue 18, items 1 and 4: a blocked read fails its collector alone, at
// its deadline, naming the file relative to --path.procfs; the scrapes
// after it do not start another read of the file nor pile up (goroutines
// and threads stay flat over 30 scrapes), and filtered scrapes of the
// healthy collectors answer.
func TestBlockedReadFailsOnlyItsCollector(t *testing.T) {
	for _, tc := range []struct {
		file, collector, healthy string
	}{
		{"meminfo", "pool", "workloads"},
		{"pressure/memory", "pool", "workloads"},
		{"2101/stat", "workloads", "pool"},
		{"2101/cmdline", "workloads", "pool"},
		{"2101/status", "workloads", "pool"},
	} {
		t.Run(strings.ReplaceAll(tc.file, "/", "_"), func(t *testing.T) {
			dir := blockedTree(t, tc.file)
			p := testexporter.Start(t, nil, "--path.procfs="+dir, "--path.sysfs="+sysFixture(t, "spark"), noGPU,
				"--no-collector.thermal", "--path.read-timeout=200ms", "--web.max-requests=0")
			first := boundedGet(t, p, "/metrics")
			if success(first, tc.collector) != 0 || success(first, tc.healthy) != 1 || success(first, "platform") != 1 {
				t.Fatalf("with %s blocked: %s success %v, %s %v, platform %v", tc.file, tc.collector,
					success(first, tc.collector), tc.healthy, success(first, tc.healthy), success(first, "platform"))
			}
			// Warmed up: each reader keeps a few idle workers. The fewest
			// goroutines over ten scrapes: a scrape's own come and go, a
			// pile-up raises the floor.
			var last string
			fewest := func(n int) float64 {
				low := math.Inf(1)
				for range n {
					last = boundedGet(t, p, "/metrics")
					g, _ := testexporter.Value(last, "go_goroutines")
					low = min(low, g)
				}
				return low
			}
			goroutines := fewest(10)
			threadsBefore := threads(t, p.PID())
			fewest(20)
			if g := fewest(10); g > goroutines+8 {
				t.Errorf("goroutines grew from %v to %v over 30 scrapes", goroutines, g)
			}
			if success(last, tc.collector) != 0 {
				t.Errorf("%s recovered while %s is still blocked", tc.collector, tc.file)
			}
			if n := threads(t, p.PID()); n > threadsBefore+3 {
				t.Errorf("threads grew from %d to %d over 30 scrapes", threadsBefore, n)
			}
			if m := boundedGet(t, p, "/metrics?collect[]="+tc.healthy); success(m, tc.healthy) != 1 {
				t.Errorf("collect[]=%s beside the blocked file: success %v", tc.healthy, success(m, tc.healthy))
			}
			p.WaitLog(t, tc.file+": blocked: no answer within 200ms")
			if strings.Contains(p.Logs(), dir) {
				t.Errorf("the log names --path.procfs:\n%s", p.Logs())
			}
		})
	}
}

// Issue 18, item 2: SIGTERM while a read is blocked (its writer holds the
// pipe open and writes nothing, as a stuck process does) ends the exporter
// within 6 s, exit status 0, even with a read deadline longer than the
// shutdown grace.
func TestSIGTERMWhileAReadIsBlocked(t *testing.T) {
	dir := blockedTree(t, "2101/cmdline")
	p := testexporter.Start(t, nil, "--path.procfs="+dir, noGPU, "--no-collector.thermal", "--path.read-timeout=1m")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+"/metrics", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	var w *os.File
	pipe := filepath.Join(dir, "2101/cmdline")
	testexporter.Eventually(t, 30*time.Second, func() bool {
		fd, err := syscall.Open(pipe, syscall.O_WRONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
		if err != nil {
			return false
		}
		w = os.NewFile(uintptr(fd), pipe)
		return true
	}, "the scan to open the blocked cmdline")
	defer w.Close()

	exited := make(chan int, 1)
	signalled := time.Now()
	go func() { exited <- p.Stop(t) }()
	select {
	case code := <-exited:
		if took := time.Since(signalled); took > 6*time.Second {
			t.Errorf("exited %v after SIGTERM, want within 6s", took)
		}
		if code != 0 {
			t.Errorf("exit status %d, want 0", code)
		}
	case <-time.After(30 * time.Second):
		w.Close()
		t.Fatal("the exporter did not exit within 30s of SIGTERM with a read blocked")
	}
}

// Issue 18, item 3: a GPU process's comm that blocks fails the gpu
// collector under --gpu.timeout, the process is exported with comm="",
// and scrapes do not keep a thread each.
func TestBlockedCommFailsTheGPUCollector(t *testing.T) {
	dir := blockedTree(t, "4102/comm")
	p := testexporter.Start(t, []string{"SPARK_NVML_SCENARIO=" + scenarioWith(t, "process pid=4102 used=30GiB")},
		"--path.procfs="+dir, "--path.sysfs="+sysFixture(t, "spark"), "--gpu.nvml-library="+testexporter.StandInNVML(t),
		"--gpu.timeout=200ms", "--gpu.max-age=0", "--no-collector.thermal")
	first := boundedGet(t, p, gpuOnly)
	if success(first, "gpu") != 0 || !strings.Contains(first, `spark_gpu_process_memory_bytes{comm="",gpu="0",pid="4102"}`) {
		t.Fatalf("with 4102/comm blocked:\n%s", first)
	}
	before := threads(t, p.PID())
	for range 30 {
		boundedGet(t, p, gpuOnly)
	}
	if n := threads(t, p.PID()); n > before+3 {
		t.Errorf("threads grew from %d to %d over 30 scrapes", before, n)
	}
	p.WaitLog(t, "4102/comm: blocked")
}

// Issue 18, items 4 and 9: files linked to /dev/zero (endless) or to
// another file are refused, a file beyond its bound is an error; each
// fails only what reads it, and the exporter stays up.
func TestEndlessAndLinkedFilesAreRefused(t *testing.T) {
	dir := testexporter.CopyTree(t, fixtureDir(t, "spark"))
	for _, name := range []string{"meminfo", "2101/cmdline", "2302/stat", "2005/status"} {
		os.Remove(filepath.Join(dir, name))
		if err := os.Symlink("/dev/zero", filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	// Debug: a collector failing again is logged at debug level.
	p := testexporter.Start(t, nil, "--path.procfs="+dir, noGPU, "--no-collector.thermal", "--log.level=debug")
	m := boundedGet(t, p, "/metrics")
	if success(m, "pool") != 0 || success(m, "workloads") != 1 {
		t.Errorf("pool %v (want 0), workloads %v (want 1)", success(m, "pool"), success(m, "workloads"))
	}
	if v, _ := testexporter.Value(m, "spark_workload_unreadable_processes"); v < 2 {
		t.Errorf("unreadable processes %v, want the linked ones counted", v)
	}
	p.WaitLog(t, "open meminfo: too many levels of symbolic links")

	// A meminfo of 2 MiB, a regular file, is beyond the bound of 1 MiB.
	os.Remove(filepath.Join(dir, "meminfo"))
	if err := os.WriteFile(filepath.Join(dir, "meminfo"), []byte(strings.Repeat("MemTotal: 1 kB\n", 140000)), 0o644); err != nil {
		t.Fatal(err)
	}
	if m := boundedGet(t, p, "/metrics?collect[]=pool"); success(m, "pool") != 0 {
		t.Errorf("a 2 MiB meminfo: pool success %v", success(m, "pool"))
	}
	p.WaitLog(t, "larger than 1 MiB")
}

// Issue 18, item 6: a query that is not exactly collect[] and exclude[]
// with known names is a 400, never a full scrape: url.Values would drop
// what it cannot parse without a word.
func TestMalformedFiltersAreRefused(t *testing.T) {
	p := testexporter.Start(t, nil, "--path.procfs="+fixtureDir(t, "spark"), noGPU, "--no-collector.thermal")
	client := &http.Client{Timeout: 30 * time.Second}
	// Go's own parser refuses more than 10,000 parameters.
	many := strings.Repeat("collect[]=pool&", 10000) + "collect[]=pool"
	some := strings.Repeat("collect[]=pool&", 32) + "exclude[]=pool"
	for query, want := range map[string]string{
		"collect[]=bogus;x":        "malformed query",
		"exclude[]=workloads;x":    "malformed query",
		"collect[]=%zz":            "malformed query",
		"collect[]=pool&foo=1":     `unknown query parameter "foo"`,
		"collect":                  `unknown query parameter "collect"`,
		many:                       "malformed query",
		some:                       "33 collect[] and exclude[] parameters, more than 32",
		"collect[]=pool;exclude[]": "malformed query",
	} {
		code, _, body := fetch(t, client, p.URL+"/metrics?"+query, nil)
		if code != http.StatusBadRequest || !strings.Contains(body, want) || strings.Contains(body, "spark_") {
			t.Errorf("?%.40s: %d %q, want a 400 saying %q", query, code, body, want)
		}
	}
	if code, _, body := fetch(t, client, p.URL+"/metrics?collect[]=pool&exclude[]=workloads", nil); code != http.StatusOK || success(body, "pool") != 1 {
		t.Errorf("a good filter: %d", code)
	}
}

// Issue 18, item 9: only GET and HEAD are served, on every endpoint; any
// other method is a 405 naming them, and starts no scrape.
func TestOnlyGetAndHeadAreServed(t *testing.T) {
	p := testexporter.Start(t, nil, "--path.procfs="+fixtureDir(t, "spark"), noGPU, "--no-collector.thermal", "--log.level=debug")
	client := &http.Client{Timeout: 30 * time.Second}
	for _, path := range []string{"/metrics", "/", "/nosuch"} {
		for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch, http.MethodTrace, http.MethodOptions} {
			req, _ := http.NewRequest(method, p.URL+path, strings.NewReader("x"))
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
				t.Errorf("%s %s: %s, Allow %q; want 405 with Allow: GET, HEAD", method, path, resp.Status, resp.Header.Get("Allow"))
			}
		}
	}
	resp, err := client.Head(p.URL + "/metrics")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("HEAD /metrics: %v %v", resp, err)
	}
	if strings.Contains(p.Logs(), "collector failed") {
		t.Errorf("a refused method ran a scrape that failed:\n%s", p.Logs())
	}
}

// closedByServer tells whether the server closed conn: a read ends without data
// within the bound.
func closedByServer(t *testing.T, conn net.Conn) bool {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	buf := make([]byte, 4096)
	for {
		_, err := conn.Read(buf)
		if err != nil {
			var ne net.Error
			return !(errors.As(err, &ne) && ne.Timeout())
		}
	}
}

// Issue 18, item 7: an idle keep-alive connection is closed after
// --web.idle-timeout, a client that never finishes its request after
// --web.read-timeout, and no more than --web.max-connections are open at
// once: the others wait to be accepted, and are once a slot frees.
func TestConnectionsAreBounded(t *testing.T) {
	p := testexporter.Start(t, nil, "--path.procfs="+fixtureDir(t, "spark"), noGPU, "--no-collector.thermal",
		"--web.idle-timeout=300ms", "--web.read-timeout=300ms", "--web.max-connections=4")
	addr := strings.TrimPrefix(p.URL, "http://")
	dial := func() net.Conn {
		t.Helper()
		conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	request := "GET /metrics?collect[]=pool HTTP/1.1\r\nHost: test\r\n\r\n"

	idle := dial()
	if _, err := idle.Write([]byte(request)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(idle), nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("first request: %v %v", resp, err)
	}
	if !closedByServer(t, idle) {
		t.Error("an idle keep-alive connection was not closed")
	}

	slow := dial()
	if _, err := slow.Write([]byte("GET /metrics HTTP/1.1\r\nHost: te")); err != nil {
		t.Fatal(err)
	}
	if !closedByServer(t, slow) {
		t.Error("a client that never finished its request was not disconnected")
	}

	// Four connections that never send a request fill the slots; a
	// fifth's request is answered once they are closed.
	fds := func() int {
		entries, err := os.ReadDir("/proc/" + strconv.Itoa(p.PID()) + "/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(entries)
	}
	before := fds()
	held := make([]net.Conn, 4)
	for i := range held {
		held[i] = dial()
	}
	waiting := make([]net.Conn, 40)
	for i := range waiting {
		waiting[i] = dial()
		waiting[i].Write([]byte(request))
	}
	for range 20 {
		if n := fds(); n > before+4+2 {
			t.Fatalf("%d descriptors open with 44 connections, %d before: more than 4 connections accepted", n, before)
		}
		time.Sleep(20 * time.Millisecond) // polling a bounded number of times
	}
	for _, c := range held {
		c.Close()
	}
	waiting[0].SetReadDeadline(time.Now().Add(20 * time.Second))
	if resp, err := http.ReadResponse(bufio.NewReader(waiting[0]), nil); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("a waiting connection once the slots freed: %v %v", resp, err)
	}
}
