package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/spark-exporter/spark_exporter/collector"
	"github.com/spark-exporter/spark_exporter/internal/status"
	"github.com/spark-exporter/spark_exporter/internal/testing/jsonschema"
	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
)

// The status page and its JSON share --web.max-requests with /metrics:
// with a scrape in flight and a limit of one, both are refused, and a
// page view in flight refuses a scrape and the JSON.
func TestStatusSharesMaxRequests(t *testing.T) {
	g := &gate{open: make(chan struct{}), entered: make(chan struct{}, 1)}
	exporter := collector.NewExporter(map[string]collector.Collector{"gate": g}, nil, log.NewNopLogger())
	metrics := newMetricsHandler(exporter, false, 1, log.NewNopLogger())
	mux := http.NewServeMux()
	mux.Handle("/metrics", metrics)
	// Every view runs the collectors (a max age of 0), so that each
	// holds the gate.
	for pattern, h := range statusRoutes(exporter, "/metrics", 0) {
		mux.Handle(pattern, metrics.limit(h))
	}
	for _, first := range []string{"/metrics", "/"} {
		var wg sync.WaitGroup
		wg.Go(func() {
			if w := get(mux, first); w.Code != http.StatusOK {
				t.Errorf("%s: %d", first, w.Code)
			}
		})
		select {
		case <-g.entered:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s did not start a gather", first)
		}
		for _, target := range []string{"/metrics", "/", "/api/v1/status"} {
			if w := get(mux, target); w.Code != http.StatusServiceUnavailable {
				t.Errorf("%s with %s in flight and --web.max-requests=1: %d, want 503", target, first, w.Code)
			}
		}
		g.open <- struct{}{}
		wg.Wait()
	}
}

// /metrics and the status page render one typed state: after a scrape the
// page shows that scrape's figures, its collectors' durations included
// (so it ran no collector of its own), and a change on the host shows in
// both through the next scrape.
func TestStatusRendersTheScrapesState(t *testing.T) {
	proc := testexporter.CopyTree(t, fixtureDir(t, "spark"))
	exporter, logger := benchExporter(t, proc, "--no-collector.thermal")
	mux := http.NewServeMux()
	mux.Handle("/metrics", newMetricsHandler(exporter, false, 4, logger))
	// A state of any age is shown: the page never runs the collectors
	// once a scrape has.
	for pattern, h := range statusRoutes(exporter, "/metrics", time.Hour) {
		mux.Handle(pattern, h)
	}
	for _, freeKiB := range []int{21474836, 3145728} {
		meminfo, err := os.ReadFile(filepath.Join(proc, "meminfo"))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(meminfo), "\n")
		for i, l := range lines {
			if strings.HasPrefix(l, "MemFree:") {
				lines[i] = fmt.Sprintf("MemFree:        %d kB", freeKiB)
			}
		}
		if err := os.WriteFile(filepath.Join(proc, "meminfo"), []byte(strings.Join(lines, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
		metrics := get(mux, "/metrics").Body.String()
		var m status.Model
		if err := json.Unmarshal(get(mux, status.APIPath).Body.Bytes(), &m); err != nil || m.Pool == nil {
			t.Fatalf("status: %v %+v", err, m.Pool)
		}
		v := func(series string) float64 {
			x, ok := testexporter.Value(metrics, series)
			if !ok {
				t.Fatalf("/metrics lacks %s", series)
			}
			return x
		}
		if free := int64(freeKiB) << 10; m.Pool.FreeBytes != free || v("spark_pool_free_bytes") != float64(free) {
			t.Errorf("free: the page %d, /metrics %v; the host %d", m.Pool.FreeBytes, v("spark_pool_free_bytes"), free)
		}
		if h := v("spark_pool_headroom_bytes"); float64(m.Pool.HeadroomBytes) != h {
			t.Errorf("headroom: the page %d, /metrics %v", m.Pool.HeadroomBytes, h)
		}
		if len(m.Collectors) < 4 {
			t.Errorf("collectors %+v, want the exporter's", m.Collectors)
		}
		for _, c := range m.Collectors {
			d := v(`spark_scrape_collector_duration_seconds{collector="` + c.Name + `"}`)
			ok := v(`spark_scrape_collector_success{collector="`+c.Name+`"}`) == 1
			if c.DurationSeconds != d || c.Success != ok {
				t.Errorf("collector %s: the page %v %v, /metrics %v %v", c.Name, c.Success, c.DurationSeconds, ok, d)
			}
		}
	}
}

// The JSON the built exporter serves, on the stand-in's scenarios, is
// what docs/status.schema.json says; `spark_exporter status` prints it as
// a report in words.
func TestStatusJSONAndReport(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(testexporter.Root(t), "docs", "status.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	schema, err := jsonschema.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	plans := "--plan.file=" + filepath.Join(testexporter.Root(t), "testdata", "plans", "spark.yml")
	for _, tc := range []struct {
		name   string
		start  func(t *testing.T) *testexporter.Process
		report []string
	}{
		{"throttling", func(t *testing.T) *testexporter.Process {
			return testexporter.StartSpark(t, testexporter.FrozenThrottling(t), plans, "--thermal.interval=100ms", "--thermal.window=1s")
		}, []string{"Throttling:", "throttle signature", "vllm       pid 2101", "Plan     llama-3.1-70b-qlora: Will not fit", "all collectors ok"}},
		{"no-gpu", func(t *testing.T) *testexporter.Process {
			return testexporter.Start(t, nil, "--path.procfs="+fixtureDir(t, "spark"), noGPU)
		}, []string{"GPU      none reported: NVML is not loaded", "Pool     Usable memory 56.0 GiB (MemAvailable less free CMA): no danger; headroom for a new job 16.5 GiB now"}},
		// Kernel 7.0.0-1019's CMA accounting: a note, and the large free
		// blocks of its buddyinfo.
		{"cma-anomaly", func(t *testing.T) *testexporter.Process {
			return testexporter.Start(t, nil, "--path.procfs="+fixtureDir(t, "cma-anomaly"), noGPU, noKmsg)
		}, []string{"note: The kernel's CMA accounting is wrong: CmaFree 0.9 GiB is above CmaTotal 0.0 GiB", "large blocks: 24.4 GiB free in blocks of 32 MiB or more"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.start(t)
			var body string
			testexporter.Eventually(t, 30*time.Second, func() bool {
				body = p.Get(t, "/api/v1/status")
				// Throttled at once on the flags; the signature once the
				// samples cover the window.
				return tc.name != "throttling" || strings.Contains(body, `"state":"throttled"`) && strings.Contains(body, `"signature":true`)
			}, "a thermal verdict")
			for _, e := range schema.Validate([]byte(body)) {
				t.Errorf("schema: %s", e)
			}
			out, err := testexporter.Command(t, "status", "--url="+p.URL).CombinedOutput()
			if err != nil {
				t.Fatalf("status: %v\n%s", err, out)
			}
			for _, want := range tc.report {
				if !strings.Contains(string(out), want) {
					t.Errorf("the report lacks %q:\n%s", want, out)
				}
			}
		})
	}
	// Nothing listening: exit status 1 and a message without the URL's
	// credentials.
	out, err := testexporter.Command(t, "status", "--url=http://user:Secret123@127.0.0.1:1", "--timeout=5s").CombinedOutput()
	if code := exitCode(err); code != 1 || strings.Contains(string(out), "Secret123") || !strings.Contains(string(out), "127.0.0.1:1") {
		t.Errorf("status against nothing: exit %d\n%s", code, out)
	}
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}
