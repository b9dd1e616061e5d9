package browser

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
	"github.com/spark-exporter/spark_exporter/internal/units"
)

// chromiumPath is Debian's chromium (`make deps` installs it), or
// SPARK_CHROMIUM. Without it the browser test is skipped, unless
// SPARK_REQUIRE_PACKAGES=1 (CI), where it fails.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("SPARK_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	const install = "apt-get install --no-install-recommends chromium fonts-dejavu-core"
	if os.Getenv("SPARK_REQUIRE_PACKAGES") == "1" {
		t.Fatal("chromium not found: " + install + " (or set SPARK_CHROMIUM)")
	}
	t.Skip("chromium not found: SKIPPED; " + install + " runs this test")
	return ""
}

// screenshotDir is where the screenshots go: $SPARK_SCREENSHOT_DIR (make
// screenshots copies them into docs/), else the test's artifact directory.
func screenshotDir(t *testing.T) string {
	if dir := os.Getenv("SPARK_SCREENSHOT_DIR"); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	return t.ArtifactDir()
}

// newBrowser starts headless Chromium with a fresh profile and none of its
// background connections (which this network refuses, and which a test
// has no use for).
func newBrowser(t *testing.T, path string) context.Context {
	t.Helper()
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("font-render-hinting", "none"))
	browser, cancelBrowser := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancelBrowser(); cancelAlloc() })
	// The first Run starts the browser; it must not carry a timeout.
	if err := chromedp.Do(browser); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	return browser
}

// seen is what a person sees on the page, read from its DOM.
type seen struct {
	Pool          string            `json:"pool"`
	Step          string            `json:"step"`
	Bar           map[string]string `json:"bar"`      // data id: value
	BarText       map[string]string `json:"bar_text"` // data id: text
	Thermal       string            `json:"thermal"`
	ThermalState  string            `json:"thermal_state"`
	Evidence      []string          `json:"evidence"`
	Temperature   string            `json:"temperature"`
	Points        map[string]int    `json:"points"` // chart: points drawn
	ChartDesc     []string          `json:"chart_desc"`
	RefLines      int               `json:"ref_lines"`
	Workloads     string            `json:"workloads"`
	WorkloadState string            `json:"workload_state"`
	Plans         []string          `json:"plans"`
	NVML          string            `json:"nvml"`
	GPUNone       string            `json:"gpu_none"`
	Updates       int               `json:"updates"`
	Swaps         int               `json:"swaps"`
	Live          string            `json:"live"`
	Wide          int               `json:"wide"` // document width
	Links         []string          `json:"links"`
	Bytes         int               `json:"bytes"`
}

const readPage = `(() => {
  const q = s => document.querySelector(s), text = s => (q(s) || {}).textContent || "";
  const out = {bar: {}, bar_text: {}, points: {}, chart_desc: [], plans: [], evidence: [], links: []};
  out.pool = text("#pool .verdict");
  out.step = q("#pool .step") && !q("#pool .step").hidden ? text("#pool .step") : "";
  document.querySelectorAll("#pool data").forEach(d => { out.bar[d.id] = d.value; out.bar_text[d.id] = d.textContent; });
  out.thermal = text("#gpu0 .verdict");
  out.thermal_state = (q("#gpu0 .verdict") || {dataset: {}}).dataset.state || "";
  document.querySelectorAll("#gpu0 .evidence li").forEach(li => out.evidence.push(li.textContent));
  out.temperature = text('#gpu0 [data-k$=".temperature_celsius"]');
  document.querySelectorAll("#gpu0 svg[data-chart]").forEach(s => {
    const pts = s.querySelector("polyline").getAttribute("points").trim();
    out.points[s.dataset.chart] = pts ? pts.split(/\s+/).length : 0;
    out.chart_desc.push(s.querySelector("desc").textContent);
  });
  out.ref_lines = document.querySelectorAll("#gpu0 line.ref").length;
  out.workloads = text("#workloads .verdict");
  out.workload_state = (q("#workloads .verdict") || {dataset: {}}).dataset.state || "";
  document.querySelectorAll("#plans li").forEach(li => out.plans.push(li.textContent));
  out.nvml = text("#health .verdict");
  out.gpu_none = text("#gpu-none .verdict");
  out.updates = +q("#status").dataset.updates || 0;
  out.swaps = +q("#status").dataset.swaps || 0;
  out.live = text("#live");
  out.wide = document.documentElement.scrollWidth;
  document.querySelectorAll("a").forEach(a => out.links.push(a.getAttribute("href")));
  out.bytes = document.documentElement.outerHTML.length;
  return out;
})()`

// page opens the exporter's status page in a new tab, waits until the
// page's own script has refreshed it from its figures at least once,
// and returns the tab and what it shows; console messages of the tab are
// collected for noConsoleErrors.
type tab struct {
	ctx      context.Context
	mu       sync.Mutex
	messages []string
}

func openPage(t *testing.T, browser context.Context, url string, width int64, dark bool) *tab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser)
	t.Cleanup(cancel)
	tb := &tab{ctx: ctx}
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleWarning || m.IsException() {
				tb.mu.Lock()
				tb.messages = append(tb.messages, m.String())
				tb.mu.Unlock()
			}
		}
	}()
	scheme := "light"
	if dark {
		scheme = "dark"
	}
	runActions(t, ctx, 60*time.Second, chromedp.EmulateViewport(width, 900), chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}})
		return err
	}), chromedp.Navigate(url+"/"))
	tb.waitFor(t, `(+document.getElementById("status").dataset.updates || 0) >= 1`, "the page's first refresh")
	return tb
}

func runActions(t *testing.T, ctx context.Context, timeout time.Duration, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatal(err)
	}
}

// waitFor polls a predicate in the page until it holds, within a bound.
func (tb *tab) waitFor(t *testing.T, predicate, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 60*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](predicate)); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

func (tb *tab) read(t *testing.T) seen {
	t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 30*time.Second)
	defer cancel()
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[json.RawMessage](readPage))
	if err != nil {
		t.Fatal(err)
	}
	var s seen
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func (tb *tab) screenshot(t *testing.T, path string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(tb.ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
}

func (tb *tab) noConsoleErrors(t *testing.T) {
	t.Helper()
	tb.mu.Lock()
	defer tb.mu.Unlock()
	for _, m := range tb.messages {
		t.Errorf("console: %s", m)
	}
}

// withPool is a copy of the /proc tree src with the pool files (meminfo,
// vmstat, pressure) of the tree pool put in where src has none.
func withPool(t *testing.T, src, pool string) string {
	dir := testexporter.CopyTree(t, src)
	for _, name := range []string{"meminfo", "vmstat", "pressure/memory"} {
		path := filepath.Join(dir, name)
		if _, err := os.Stat(path); err == nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join(pool, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// fastThermalWindow fills a thermal window within two seconds.
var fastThermalWindow = []string{"--thermal.interval=100ms", "--thermal.window=2s"}

// The status page as a person sees it in a real browser, on the four
// scenarios of the stand-in: what it says, that its figures are /metrics',
// that it draws the thermal window, that it updates itself while the
// scenario moves, and that the browser reports no error.
func TestStatusPageInBrowser(t *testing.T) {
	chrome := chromiumPath(t)
	shots := screenshotDir(t)
	browser := newBrowser(t, chrome)
	plans := "--plan.file=" + filepath.Join(testexporter.Root(t), "testdata", "plans", "spark.yml")

	for _, sc := range []struct {
		name  string
		start func(t *testing.T) *testexporter.Process
		// settled is a predicate the page must reach before it is read
		// (a thermal window filled).
		settled string
		check   func(t *testing.T, s seen)
	}{
		{
			name: "idle",
			start: func(t *testing.T) *testexporter.Process {
				return testexporter.Start(t, testexporter.FrozenAt(t, "gb10-idle", "1m"), append([]string{
					"--path.procfs=" + withPool(t, fixtureDir(t, "idle"), fixtureDir(t, "spark")), "--gpu.nvml-library=" + testexporter.StandInNVML(t)}, fastThermalWindow...)...)
			},
			settled: `document.querySelector("#gpu0 .verdict").dataset.state === "normal"`,
			check: func(t *testing.T, s seen) {
				want(t, "pool verdict", s.Pool, "no danger; headroom for a new job")
				want(t, "thermal verdict", s.Thermal, "Normal: not throttling.")
				want(t, "workloads verdict", s.Workloads, "No inference server or training job on the pool.")
				want(t, "NVML", s.NVML, "NVML is up.")
			},
		},
		{
			name: "throttling",
			start: func(t *testing.T) *testexporter.Process {
				return testexporter.StartSpark(t, testexporter.FrozenThrottling(t), append([]string{plans}, fastThermalWindow...)...)
			},
			settled: `document.querySelectorAll("#gpu0 .evidence li").length > 0 && document.querySelector("#gpu0 polyline").getAttribute("points").split(" ").length >= 10`,
			check: func(t *testing.T, s seen) {
				want(t, "thermal verdict", s.Thermal, "Throttling: the GPU is slowing itself down because of heat")
				if s.ThermalState != "throttled" {
					t.Errorf("thermal state %q, want throttled", s.ThermalState)
				}
				want(t, "evidence", strings.Join(s.Evidence, "\n"), "throttle signature")
				want(t, "evidence", strings.Join(s.Evidence, "\n"), "Power below the rating")
				want(t, "workloads verdict", s.Workloads, "Training beside inference capped at 0.5 or less")
				if len(s.Plans) != 3 {
					t.Errorf("planned runs shown: %q, want the plan file's three", s.Plans)
				}
				want(t, "plans", strings.Join(s.Plans, "\n"), "llama-3.1-70b-qlora Will not fit: needs 65.2 GiB")
			},
		},
		{
			// vllm-default: vLLM with no cap flag (its default, 0.9) beside
			// a torchrun fine-tune, on the plateau 25 minutes in.
			name: "contention",
			start: func(t *testing.T) *testexporter.Process {
				return testexporter.Start(t, testexporter.FrozenAt(t, "gb10-throttle", "25m"), append([]string{
					"--path.procfs=" + withPool(t, filepath.Join(fixtureDir(t, "workloads"), "vllm-default"), fixtureDir(t, "spark")), "--gpu.nvml-library=" + testexporter.StandInNVML(t)}, fastThermalWindow...)...)
			},
			settled: `document.querySelector("#gpu0 .verdict").dataset.state !== "collecting"`,
			check: func(t *testing.T, s seen) {
				want(t, "workloads verdict", s.Workloads, "Training beside an uncapped inference server: vllm (pid 2101, default cap 90 %)")
				if s.WorkloadState != "contention" {
					t.Errorf("workloads state %q, want contention", s.WorkloadState)
				}
				want(t, "power chart", strings.Join(s.ChartDesc, "\n"), "Power over the last 2s: 100.5 W to 100.5 W, now 100.5 W; the ~100 W plateau and the 240 W rating are marked.")
			},
		},
		{
			name: "no-gpu",
			start: func(t *testing.T) *testexporter.Process {
				return testexporter.Start(t, nil, "--path.procfs="+fixtureDir(t, "spark"), noGPU)
			},
			check: func(t *testing.T, s seen) {
				// Said once, where the GPU would be: not again in the
				// exporter's section.
				want(t, "GPU section", s.GPUNone, "No GPU reported. NVML is not loaded: no NVIDIA driver or library on this host")
				if s.NVML != "" {
					t.Errorf("NVML's state said twice: %q beside %q", s.NVML, s.GPUNone)
				}
				if len(s.Points) != 0 {
					t.Errorf("charts without a GPU: %v", s.Points)
				}
			},
		},
	} {
		t.Run(sc.name, func(t *testing.T) {
			p := sc.start(t)
			tb := openPage(t, browser, p.URL, 1000, false)
			if sc.settled != "" {
				tb.waitFor(t, sc.settled, "the scenario to settle")
			}
			s := tb.read(t)
			sc.check(t, s)
			checkBarAgainstMetrics(t, s, p.Get(t, "/metrics"))
			if sc.name != "no-gpu" {
				for _, kind := range []string{"temperature", "power", "clock"} {
					if s.Points[kind] < 2 {
						t.Errorf("%s chart draws %d points, want a line", kind, s.Points[kind])
					}
				}
				if s.RefLines != 2 {
					t.Errorf("power chart marks %d values, want the plateau and the rating", s.RefLines)
				}
			}
			if s.Swaps != 0 {
				t.Errorf("the page reloaded its body %d times on a scenario that keeps its shape", s.Swaps)
			}
			want(t, "live note", s.Live, "live, refreshed every 5 s")
			for _, l := range s.Links {
				if l != "./metrics" && l != "./api/v1/status" {
					t.Errorf("a link to %q, which is not served", l)
				}
			}
			if s.Bytes > 100_000 {
				t.Errorf("the page is %d bytes, want under 100 KB", s.Bytes)
			}
			tb.screenshot(t, filepath.Join(shots, "status-"+sc.name+".png"))

			// Readable on a phone in dark mode: nothing wider than the
			// screen.
			narrow := openPage(t, browser, p.URL, 375, true)
			if sc.settled != "" {
				narrow.waitFor(t, sc.settled, "the scenario to settle")
			}
			if n := narrow.read(t); n.Wide > 375 {
				t.Errorf("at 375 px the page is %d px wide", n.Wide)
			}
			if sc.name == "throttling" {
				narrow.screenshot(t, filepath.Join(shots, "status-narrow-dark.png"))
			}
			tb.noConsoleErrors(t)
			narrow.noConsoleErrors(t)
		})
	}

	// The scenario playing, not frozen: the page's figures follow it
	// without a reload.
	t.Run("live", func(t *testing.T) {
		p := testexporter.StartSpark(t, []string{"SPARK_NVML_SCENARIO=" + testexporter.Scenario(t, "gb10-throttle"), "SPARK_NVML_SPEED=120"},
			fastThermalWindow...)
		tb := openPage(t, browser, p.URL, 1000, false)
		first := tb.read(t)
		if first.Temperature == "" || first.Temperature == "not reported" {
			t.Fatalf("no temperature shown: %q", first.Temperature)
		}
		tb.waitFor(t, fmt.Sprintf(`document.querySelector('#gpu0 [data-k$=".temperature_celsius"]').textContent !== %q`, first.Temperature),
			"the temperature shown to change")
		if s := tb.read(t); s.Swaps != 0 {
			t.Errorf("the page reloaded its body %d times", s.Swaps)
		}
		tb.noConsoleErrors(t)
	})
}

func want(t *testing.T, what, got, part string) {
	t.Helper()
	if !strings.Contains(got, part) {
		t.Errorf("%s: %q, want it to say %q", what, got, part)
	}
}

// checkBarAgainstMetrics: each figure of the pool bar, as the page's script
// last placed it, is /metrics' value, written as the server writes it.
func checkBarAgainstMetrics(t *testing.T, s seen, metrics string) {
	t.Helper()
	v := func(name string) int64 {
		x, ok := testexporter.Value(metrics, name)
		if !ok {
			t.Fatalf("/metrics lacks %s", name)
		}
		return int64(x)
	}
	total, free, cache := v("spark_pool_total_bytes"), v("spark_pool_free_bytes"), v("spark_pool_page_cache_bytes")
	flushable, reserve := v("spark_pool_flushable_bytes"), v("spark_pool_reserve_bytes")
	headroom, after := v("spark_pool_headroom_bytes"), v("spark_pool_headroom_after_flush_bytes")
	for id, b := range map[string]int64{
		"pool-total": total, "pool-free": free, "pool-used": total - free - cache,
		"pool-cache": cache - min(flushable, cache), "pool-flushable": min(flushable, cache),
		"pool-headroom": max(0, headroom), "pool-reserve": min(free, reserve),
		"pool-headroom-now": headroom, "pool-headroom-after-flush": after,
	} {
		if got := s.Bar[id]; got != fmt.Sprint(b) {
			t.Errorf("%s shows %s bytes, /metrics %d", id, got, b)
		}
		if got := s.BarText[id]; got != units.FormatGiB(float64(b)) {
			t.Errorf("%s reads %q, want %q", id, got, units.FormatGiB(float64(b)))
		}
	}
}
