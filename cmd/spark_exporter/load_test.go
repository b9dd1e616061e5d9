package main

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
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
)

// The load tests run the built exporter as Prometheus would meet it, on
// 127.0.0.1: `make bench` runs them (SPARK_LOAD_TEST=1), plain `go test`
// skips them, since they take half a minute each. Their figures go in
// docs/performance.md.

func loadTest(t *testing.T) {
	t.Helper()
	if os.Getenv("SPARK_LOAD_TEST") != "1" {
		t.Skip("a load test: SPARK_LOAD_TEST=1 runs it (make bench)")
	}
}

// envInt reads a positive whole number from the environment, or def.
func envInt(t testing.TB, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive whole number", name, s)
	}
	return n
}

// startLoaded starts the exporter on a busy Spark: the GB10 stand-in
// playing the throttling fine-tune 45 minutes in (two GPU processes), and
// a /proc of 100 processes.
func startLoaded(t *testing.T, args ...string) *testexporter.Process {
	t.Helper()
	return testexporter.Start(t, testexporter.FrozenAt(t, "gb10-throttle", "45m"), append([]string{
		"--path.procfs=" + benchProc(t, 100),
		"--path.sysfs=" + sysFixture(t, "spark"),
		"--gpu.nvml-library=" + testexporter.StandInNVML(t),
	}, args...)...)
}

// resident is a process's resident memory, from its status file: VmRSS,
// and the part of it that is its own (RssAnon: heap, stacks, the runtime)
// rather than pages of its executable and libraries (RssFile), which the
// page cache holds and shares.
type resident struct{ total, anon uint64 }

func residentOf(t *testing.T, pid int) resident {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	var r resident
	for line := range strings.Lines(string(data)) {
		name, v, _ := strings.Cut(line, ":")
		kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch {
		case name != "VmRSS" && name != "RssAnon":
		case err != nil:
			t.Fatalf("%s: %v", name, err)
		case name == "VmRSS":
			r.total = kb << 10
		default:
			r.anon = kb << 10
		}
	}
	if r.total == 0 {
		t.Fatal("no VmRSS")
	}
	return r
}

func (r resident) String() string {
	return fmt.Sprintf("%s (%s anonymous, %s file)", mib(r.total), mib(r.anon), mib(r.total-r.anon))
}

// sampleValue reads one series' value from an exposition, or false.
func sampleValue(body []byte, series string) (float64, bool) {
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), series+" "); ok {
			v, err := strconv.ParseFloat(rest, 64)
			return v, err == nil
		}
	}
	return 0, false
}

// complete says whether a scrape's body holds every collector (gpu,
// platform, pool, thermal, workloads), succeeded.
var collectorSuccess = regexp.MustCompile(`(?m)^spark_scrape_collector_success\{collector="(\w+)"\} 1$`)

func complete(body []byte) bool {
	return len(collectorSuccess.FindAll(body, -1)) == 5 && bytes.Contains(body, []byte("spark_exporter_build_info{"))
}

func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// 50 clients scrape as fast as they can for 20 s: no request fails, every
// answer is a whole scrape or a 503 beyond --web.max-requests, the
// exporter counts the 503s as the clients do, and its memory stays
// bounded. (That no more than the limit run at once is
// TestMaxRequestsHoldsForEveryScrape's: promhttp's in-flight gauge counts
// the requests being refused too.)
func TestLoadConcurrentClients(t *testing.T) {
	loadTest(t)
	const limit = 5
	clients := envInt(t, "SPARK_LOAD_CLIENTS", 50)
	duration := time.Duration(envInt(t, "SPARK_LOAD_SECONDS", 20)) * time.Second
	p := startLoaded(t, fmt.Sprintf("--web.max-requests=%d", limit))
	startRSS := residentOf(t, p.PID())

	client := &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{MaxIdleConnsPerHost: clients},
	}
	var ok, refused, other, broken, failed atomic.Int64
	var maxRSS atomic.Uint64
	deadline := time.Now().Add(duration)
	stop := make(chan struct{})
	var sampler sync.WaitGroup
	sampler.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if r := residentOf(t, p.PID()).total; r > maxRSS.Load() {
					maxRSS.Store(r)
				}
			}
		}
	})
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				resp, err := client.Get(p.URL + "/metrics")
				if err != nil {
					failed.Add(1)
					continue
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				switch {
				case err != nil:
					failed.Add(1)
				case resp.StatusCode == http.StatusServiceUnavailable:
					refused.Add(1)
				case resp.StatusCode != http.StatusOK:
					other.Add(1)
				case !complete(body):
					broken.Add(1)
				default:
					ok.Add(1)
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	sampler.Wait()

	final := []byte(p.Get(t, "/metrics"))
	served200, _ := sampleValue(final, `promhttp_metric_handler_requests_total{code="200"}`)
	served503, _ := sampleValue(final, `promhttp_metric_handler_requests_total{code="503"}`)
	cpu, _ := sampleValue(final, "process_cpu_seconds_total")
	t.Logf("%d clients for %v, --web.max-requests=%d: %d scrapes (%.0f/s), %d refused (503), "+
		"%d other statuses, %d incomplete, %d failed requests; "+
		"exporter CPU %.1f s (%.0f µs per scrape served); VmRSS %s at start, at most %s under load",
		clients, duration, limit, ok.Load(), float64(ok.Load())/duration.Seconds(), refused.Load(),
		other.Load(), broken.Load(), failed.Load(),
		cpu, cpu/float64(ok.Load())*1e6, startRSS, mib(maxRSS.Load()))

	if failed.Load() != 0 || other.Load() != 0 || broken.Load() != 0 {
		t.Errorf("%d failed requests, %d other statuses, %d incomplete scrapes; want none", failed.Load(), other.Load(), broken.Load())
	}
	if ok.Load() == 0 || refused.Load() == 0 {
		t.Errorf("%d scrapes, %d refused: %d clients against a limit of %d should see both", ok.Load(), refused.Load(), clients, limit)
	}
	if int64(served503) != refused.Load() || int64(served200) != ok.Load() {
		t.Errorf("the exporter counted %v answered and %v refused, the clients %d and %d", served200, served503, ok.Load(), refused.Load())
	}
	const bound = 64 << 20
	if maxRSS.Load() > bound {
		t.Errorf("resident memory reached %s under load, beyond %s", mib(maxRSS.Load()), mib(bound))
	}
}

// 10,000 scrapes one after another: no growth of resident memory from the
// 1,000th on, and the exporter's own memory (RssAnon) under 10 MiB; CPU
// and allocations per scrape as the exporter itself counts them
// (process_cpu_seconds_total, go_memstats_*), medians over batches of 100
// scrapes. VmRSS is reported: most of it is the executable's own pages.
func TestLoadMemoryOverManyScrapes(t *testing.T) {
	loadTest(t)
	scrapes := envInt(t, "SPARK_LOAD_SCRAPES", 10_000)
	run := scrapeMany(t, startLoaded(t), scrapes, complete)
	t.Logf("%d scrapes: RSS %s after 1,000, %s after %d; per scrape (median of %d batches of %d): "+
		"CPU %.0f µs, %.0f allocations, %.0f KiB allocated",
		scrapes, run.at1000, run.end, scrapes, run.batches, run.batch, run.cpu*1e6, run.allocs, run.allocBytes/1024)
	if run.end.anon > 10<<20 {
		t.Errorf("anonymous resident memory %s after %d scrapes, want under 10 MiB", mib(run.end.anon), scrapes)
	}
	// The garbage collector's timing moves the figure by a few hundred
	// KiB either way; a leak of even 100 bytes a scrape would show as 900
	// KiB over 9,000 scrapes.
	if run.end.total > run.at1000.total+768<<10 {
		t.Errorf("resident memory grew from %s to %s between the 1,000th and the %dth scrape", run.at1000, run.end, scrapes)
	}

	// The floor: the same scrapes of a program made of the libraries the
	// exporter must use and nothing else (tools/memfloor).
	floorBinary := filepath.Join(t.TempDir(), "memfloor")
	build := exec.Command("go", "build", "-o", floorBinary, "./tools/memfloor")
	build.Dir = testexporter.Root(t)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building memfloor: %v\n%s", err, out)
	}
	floor := scrapeMany(t, testexporter.StartProgram(t, floorBinary, nil, "--web.listen-address=127.0.0.1:0"), scrapes,
		func(body []byte) bool { return bytes.Contains(body, []byte("process_resident_memory_bytes ")) })
	t.Logf("memfloor, %d scrapes: RSS %s after 1,000, %s after %d; per scrape: CPU %.0f µs",
		scrapes, floor.at1000, floor.end, scrapes, floor.cpu*1e6)
	// What the exporter holds beyond the libraries' own (heap, stacks,
	// buffers): its collectors' state and the pooled gzip writer.
	if run.end.anon > floor.end.anon+2<<20 {
		t.Errorf("anonymous memory %s, over 2 MiB beyond the libraries' floor %s", mib(run.end.anon), mib(floor.end.anon))
	}
}

// memoryRun is what scrapeMany saw.
type memoryRun struct {
	at1000, end resident
	// Per scrape, medians over batches of batch scrapes.
	cpu, allocs, allocBytes float64
	batches, batch          int
}

// scrapeMany scrapes p the given number of times, one after another,
// checking each answer with whole, and reads its memory after the 1,000th
// and the last, and its CPU and allocations from its own metrics.
func scrapeMany(t *testing.T, p *testexporter.Process, scrapes int, whole func(body []byte) bool) memoryRun {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	const batch = 100
	var cpu, allocs, allocBytes []float64
	var last [3]float64
	run := memoryRun{batch: batch}
	for i := 1; i <= scrapes; i++ {
		resp, err := client.Get(p.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || !whole(body) {
			t.Fatalf("scrape %d: %v, %s:\n%s", i, err, resp.Status, body)
		}
		if i%batch == 0 {
			var now [3]float64
			for j, series := range []string{"process_cpu_seconds_total", "go_memstats_mallocs_total", "go_memstats_alloc_bytes_total"} {
				now[j], _ = sampleValue(body, series)
			}
			if i > batch {
				cpu = append(cpu, (now[0]-last[0])/batch)
				allocs = append(allocs, (now[1]-last[1])/batch)
				allocBytes = append(allocBytes, (now[2]-last[2])/batch)
			}
			last = now
		}
		if i == min(1000, scrapes) {
			run.at1000 = residentOf(t, p.PID())
		}
	}
	run.end = residentOf(t, p.PID())
	median := func(xs []float64) float64 {
		if len(xs) == 0 {
			return 0
		}
		xs = slices.Clone(xs)
		slices.Sort(xs)
		return xs[len(xs)/2]
	}
	run.cpu, run.allocs, run.allocBytes, run.batches = median(cpu), median(allocs), median(allocBytes), len(cpu)
	return run
}
