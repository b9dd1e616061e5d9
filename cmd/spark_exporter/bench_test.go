package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/go-kit/log"

	"github.com/spark-exporter/spark_exporter/collector"
	"github.com/spark-exporter/spark_exporter/internal/gpu"
	"github.com/spark-exporter/spark_exporter/internal/logging"
	"github.com/spark-exporter/spark_exporter/internal/status"
	"github.com/spark-exporter/spark_exporter/internal/testing/cputime"
	"github.com/spark-exporter/spark_exporter/internal/testing/fakeproc"
	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
)

// benchProc writes a /proc tree of a quiet Spark: the Spark fixture's pool
// files and n processes, workloads among them, none of which ran since the
// last scrape (fakeproc.Quiet).
func benchProc(b testing.TB, n int) string {
	return benchProcOf(b, fakeproc.Quiet(n))
}

// benchProcOf is a /proc tree of procs with the Spark fixture's pool,
// page-size and kernel files.
func benchProcOf(b testing.TB, procs []fakeproc.Process) string {
	b.Helper()
	root := fakeproc.WriteTree(b, procs...)
	// Every file of the Spark fixture's a real host has: one missing is
	// tried again at every scrape.
	for _, name := range []string{"meminfo", "vmstat", "pressure/memory", "buddyinfo", "self/smaps",
		"sys/kernel/arch", "sys/kernel/osrelease"} {
		// Relative to the package's directory, where tests run: finding
		// the repository root runs `go env`, a child process that
		// scripts/bench-counts.sh's callgrind cannot follow.
		data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "proc", "spark", name))
		if err != nil {
			b.Fatal(err)
		}
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o444); err != nil {
			b.Fatal(err)
		}
	}
	return root
}

// benchHandler is the exporter's /metrics handler as serve builds it, from
// command-line args: the real registry and collectors, the GB10 stand-in
// NVML, logs discarded.
func benchHandler(b *testing.B, procfs string, exporterMetrics bool, args ...string) http.Handler {
	b.Helper()
	exporter, logger := benchExporter(b, procfs, args...)
	return newMetricsHandler(exporter, exporterMetrics, 40, logger)
}

// benchExporter is the exporter's collectors as serve builds them.
func benchExporter(b testing.TB, procfs string, args ...string) (*collector.Exporter, log.Logger) {
	b.Helper()
	app := kingpin.New(name, "")
	logConfig := logging.AddFlags(app)
	gpuFlags := gpu.AddFlags(app)
	selection := collector.AddFlags(app)
	if _, err := app.Parse(append([]string{"--gpu.nvml-library=" + testexporter.StandInNVML(b)}, args...)); err != nil {
		b.Fatal(err)
	}
	logger, _ := logging.New(io.Discard, logConfig)
	exporter, closeCollectors, err := buildExporter(selection, gpuFlags.Settings(), collector.Env{ProcFS: procfs, SysFS: sysFixture(b, "spark"), Logger: logger})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(closeCollectors)
	return exporter, logger
}

// prometheusScrape is the request a Prometheus 3 server sends with its
// default scrape protocols.
func prometheusScrape() *http.Request {
	r, err := http.NewRequest(http.MethodGet, "/metrics", nil)
	if err != nil {
		panic(err)
	}
	r.Header.Set("Accept", "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,"+
		"application/openmetrics-text;version=0.0.1;q=0.5,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,"+
		"text/plain;version=0.0.4;q=0.3,*/*;q=0.2")
	r.Header.Set("Accept-Encoding", "gzip")
	r.Header.Set("X-Prometheus-Scrape-Timeout-Seconds", "10")
	return r
}

// discard is a ResponseWriter that keeps only the status and the size, so
// that the benchmark counts the exporter's work and not a recorder's.
type discard struct {
	header http.Header
	status int
	size   int
}

func (d *discard) Header() http.Header         { return d.header }
func (d *discard) WriteHeader(status int)      { d.status = status }
func (d *discard) Write(p []byte) (int, error) { d.size += len(p); return len(p), nil }

// BenchmarkScrape is a whole scrape through the /metrics handler, as
// Prometheus asks for it (gzip), with the default collectors on a quiet
// host: pool, gpu on the stand-in, thermal, workloads at 100 processes.
// cpu-ns/op is the process's CPU time per scrape, background work
// included.
func BenchmarkScrape(b *testing.B) {
	// As the exporter runs by default (--runtime.gomaxprocs).
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	quiet := benchProc(b, 100)
	for _, bc := range []struct {
		name            string
		procfs          string
		exporterMetrics bool
		args            []string
	}{
		{"default", quiet, true, nil},
		// Every process ran since the last scrape (no schedstat reads the
		// same): each one's stat is read again.
		{"every-process-ran", benchProcOf(b, fakeproc.Busy(100)), true, nil},
		{"no-exporter-metrics", quiet, false, nil},
		// NVML read on every scrape rather than the thermal sampler's.
		{"gpu-max-age=0", quiet, true, []string{"--gpu.max-age=0"}},
		// The cost of the platform collector (on the Spark /sys fixture,
		// spbm included): default less this.
		{"no-platform", quiet, true, []string{"--no-collector.platform"}},
		// The cost of the fabric collector on a host without RDMA devices
		// (the Spark /sys fixture has none): default less this.
		{"no-fabric", quiet, true, []string{"--no-collector.fabric"}},
		// The floors: what node_exporter's meminfo, vmstat and pressure
		// read, and the exporter's own go_* and process_* alone.
		{"pool-only", quiet, true, noCollectors("pool")},
		{"no-collectors", quiet, true, noCollectors()},
		// This machine's own /proc: the kernel's procfs rather than files
		// on ext4, with however many processes run here.
		{"proc=host", "/proc", true, nil},
	} {
		b.Run(bc.name, func(b *testing.B) {
			h := benchHandler(b, bc.procfs, bc.exporterMetrics, bc.args...)
			req := prometheusScrape()
			w := &discard{}
			var size int
			cputime.Loop(b, func() {
				*w = discard{header: http.Header{}}
				h.ServeHTTP(w, req)
				if w.status != 0 && w.status != http.StatusOK {
					b.Fatalf("status %d", w.status)
				}
				size = w.size
			})
			b.ReportMetric(float64(size), "gzip-bytes")
		})
	}
}

// BenchmarkScrapeWithEngine is BenchmarkScrape/proc=host with an
// inference engine on the host, as root finds one: tools/fakeengine run as
// `vllm serve --port N`, holding 200 descriptors (a vLLM holds hundreds),
// which the engines collector asks at each scrape. What an engine adds to
// a scrape is this less proc=host.
func BenchmarkScrapeWithEngine(b *testing.B) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	engine := exec.Command(vllmEngine(b), "serve", "--port", strconv.Itoa(freePort(b)))
	for range 196 {
		f, err := os.Open(os.DevNull)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		engine.ExtraFiles = append(engine.ExtraFiles, f)
	}
	pid := testexporter.StartCommand(b, engine, nil).PID()

	h := benchHandler(b, "/proc", true)
	first := httptest.NewRecorder()
	h.ServeHTTP(first, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if want := `kind="vllm",pid="` + strconv.Itoa(pid) + `"`; !strings.Contains(first.Body.String(), want) {
		b.Fatalf("the engine is not in the scrape: no %s", want)
	}
	req := prometheusScrape()
	w := &discard{}
	cputime.Loop(b, func() {
		*w = discard{header: http.Header{}}
		h.ServeHTTP(w, req)
		if w.status != 0 && w.status != http.StatusOK {
			b.Fatalf("status %d", w.status)
		}
	})
}

// BenchmarkStatusRefresh is what one viewer's refresh of the status page
// costs, on the host of BenchmarkScrape/default: the page's figures (view,
// what page.js asks for every few seconds), the JSON API and the whole
// page (a first view, or curl), each running the collectors anew; and the
// JSON served again to a second viewer within a second (shared), which
// runs nothing.
func BenchmarkStatusRefresh(b *testing.B) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	quiet := benchProc(b, 100)
	for _, bc := range []struct {
		name, path string
		maxAge     time.Duration
	}{
		{"view", status.ViewPath, 0},
		{"api", status.APIPath, 0},
		{"page", "/", 0},
		{"api-shared", status.APIPath, time.Hour},
	} {
		b.Run(bc.name, func(b *testing.B) {
			exporter, _ := benchExporter(b, quiet)
			mux := http.NewServeMux()
			for pattern, h := range statusRoutes(exporter, "/metrics", bc.maxAge) {
				mux.Handle(pattern, h)
			}
			req, err := http.NewRequest(http.MethodGet, bc.path, nil)
			if err != nil {
				b.Fatal(err)
			}
			req.Header.Set("Accept-Encoding", "gzip")
			w := &discard{}
			var size int
			cputime.Loop(b, func() {
				*w = discard{header: http.Header{}}
				mux.ServeHTTP(w, req)
				if w.status != 0 && w.status != http.StatusOK {
					b.Fatalf("status %d", w.status)
				}
				size = w.size
			})
			b.ReportMetric(float64(size), "gzip-bytes")
		})
	}
}
