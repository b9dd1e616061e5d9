package main

import (
	"errors"
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
	exporter := collector.NewExporter(map[string]collector.Collector{"gate": g}, log.NewNopLogger())
	metrics := newMetricsHandler(exporter, false, 1, log.NewNopLogger())
	mux := http.NewServeMux()
	mux.Handle("/metrics", metrics)
	for pattern, h := range statusRoutes(exporter, "/metrics", status.DefaultMaxAge) {
		mux.Handle(pattern, metrics.limit(h))
	}
	// The JSON is not tried first: the page's model, younger than a
	// second, is served again without a gather to hold.
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
			return startSpark(t, frozenThrottling(t), plans, "--thermal.interval=100ms", "--thermal.window=1s")
		}, []string{"Throttling:", "throttle signature", "vllm       pid 2101", "Plan     llama-3.1-70b-qlora: Will not fit", "all collectors ok"}},
		{"no-gpu", func(t *testing.T) *testexporter.Process {
			return testexporter.Start(t, nil, "--path.procfs="+fixtureDir(t, "spark"), noGPU)
		}, []string{"GPU      none reported: NVML is not loaded", "Pool     16.5 GiB of headroom"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.start(t)
			var body string
			testexporter.Eventually(t, 30*time.Second, func() bool {
				body = p.Get(t, "/api/v1/status")
				// Throttled at once on the flags; the signature once the
				// samples cover the window.
				return tc.name == "no-gpu" || strings.Contains(body, `"state":"throttled"`) && strings.Contains(body, `"signature":true`)
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

// frozenThrottling is the gb10-throttle scenario frozen at 45 minutes, 88 °C
// on the ~100 W plateau in thermal slowdown, on a driver that reports its
// clock event flags. Frozen, the clock cannot fall and the counters do not
// grow, so a GB10's flags-clear snapshot is only "hot, clock holding"; the
// flags make it throttled, for the pages that show throttling.
func frozenThrottling(t *testing.T) []string {
	t.Helper()
	base, err := os.ReadFile(testexporter.Scenario(t, "gb10-throttle"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "gb10-throttle-flags.scenario")
	if err := os.WriteFile(path, append([]byte("clocks_event_flags reported\n"), base...), 0o644); err != nil {
		t.Fatal(err)
	}
	return []string{"SPARK_NVML_SCENARIO=" + path, "SPARK_NVML_FREEZE=45m"}
}
