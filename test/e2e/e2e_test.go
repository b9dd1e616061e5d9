//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/report"
	"github.com/spark-exporter/spark_exporter/internal/testing/mdanchor"
	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
)

// The whole run, stack start-up excepted, ends by this long after the
// stack is ready: every wait below shares the one deadline.
const runBudget = 2 * time.Minute

// One Prometheus and one Alertmanager serve every scenario at once; each
// scenario is its own exporter on its own copy of a /proc tree, told apart
// by its instance label (which the rules keep and Alertmanager groups and
// inhibits by).
func TestEndToEnd(t *testing.T) {
	root := testexporter.Root(t)
	spark := filepath.Join(root, "testdata", "proc", "spark")
	oom := testexporter.CopyTree(t, spark)
	eviction := testexporter.CopyTree(t, spark)
	idle := idleTree(t, root)

	// Every Spark has a GB10, at rest but on the throttling Spark, which
	// plays a two-hour fine-tune that ends up throttling.
	targets := []target{
		{instance: "throttle", procfs: testexporter.CopyTree(t, spark), nvml: "gb10-throttle"},
		// The OOM Spark also carries the planned runs, so that the
		// dashboard's plan panel has data.
		{instance: "oom", procfs: oom, nvml: "gb10-idle",
			args: []string{"--plan.file=" + filepath.Join(root, "testdata", "plans", "spark.yml")}},
		{instance: "eviction", procfs: eviction, nvml: "gb10-idle"},
		{instance: "idle", procfs: idle, nvml: "gb10-idle"},
	}
	s := startStack(t, targets)
	deadline := s.ready.Add(runBudget)
	t.Logf("stack ready: Prometheus %s, Alertmanager %s, pager %s; configurations in %s (kept, with every log, if the run fails)",
		s.prom.URL, s.am.URL, s.hooks.srv.URL, s.dir)

	// The eviction scenario's stimulus starts at once: memory thrashes from
	// now on, half of wall-clock time fully stalled.
	const stallShare = 0.5
	startStall(t, filepath.Join(eviction, "pressure", "memory"), stallShare)

	// The OOM scenario's: one more OOM kill, once Prometheus has held the
	// counter's value for SparkOOMKill's whole window. On a younger series
	// increase() extrapolates less far to the left and reads one kill as
	// 1.5, "2" in the description, as a just-started Prometheus would.
	window := s.window(t, "SparkOOMKill")
	s.waitFor(t, deadline, fmt.Sprintf(`count_over_time(spark_pool_oom_kills_total{instance="oom"}[1h]) > %d`, int(window/scrapeInterval)+1),
		"Prometheus to hold the OOM Spark's counter for %v", window)
	bumpCounter(t, filepath.Join(oom, "vmstat"), "oom_kill")

	runbooks := s.runbooks(t, deadline, root)

	paged := false
	t.Run("OOMKill", func(t *testing.T) {
		a := s.waitPage(t, deadline, map[string]string{
			"alertname": "SparkOOMKill", "instance": "oom", "job": "spark", "severity": "critical",
		})
		paged = true
		runbooks.check(t, a, "sparkoomkill")
		// The fixture's MemFree, 21474836 kB, humanised.
		matches(t, a.Annotations["description"],
			`^The kernel OOM killer ended a process in the last 10 minutes \(\d+ since boot\); free memory is now 20\.48GiB\. `)
	})

	t.Run("GPUThrottling", func(t *testing.T) {
		// Warm-up (power near its peak, temperature rising: watching, not
		// throttling) until scenario minute 20, then temperature climbing
		// under a flat ~100 W: the throttle signature, held 5 minutes.
		a := s.waitPage(t, deadline, map[string]string{
			"alertname": "SparkGPUThrottling", "instance": "throttle", "job": "spark", "severity": "warning",
			"gpu": "0", "signal": "throttle_signature",
		})
		runbooks.check(t, a, "sparkgputhrottling")
		m := matches(t, a.Annotations["description"],
			`^GPU 0 shows the throttle signature: busy, power flat at (\d+) W \(below the 240 W rating\) while its temperature climbs or holds hot, now (\d+) °C\.`)
		if m == nil {
			return
		}
		// $value is the window's mean power. A flat window (spread at
		// most 20 W) may still hold the warm-up's end (119 W at minute 15,
		// falling to the plateau) beside the plateau (101 to 99 W), never
		// the warm-up's swings between 116 and 141 W. Temperature: 77 °C
		// at minute 20, 95 °C at the end.
		if w, _ := strconv.Atoi(m[1]); w < 99 || w > 119 {
			t.Errorf("description says the power is flat at %d W; a flat window of the scenario's is 99 to 119 W", w)
		}
		if c, _ := strconv.Atoi(m[2]); c < 77 || c > 95 {
			t.Errorf("description says %d °C; the scenario is between 77 and 95 °C on its plateau", c)
		}
	})

	t.Run("MemoryEviction", func(t *testing.T) {
		a := s.waitPage(t, deadline, map[string]string{
			"alertname": "SparkMemoryEviction", "instance": "eviction", "job": "spark", "severity": "warning",
			"signal": "psi_full_stall",
		})
		runbooks.check(t, a, "sparkmemoryeviction")
		m := matches(t, a.Annotations["description"], `stalled on memory ([0-9.]+)% of the time`)
		if m == nil {
			return
		}
		// The share written into the PSI file, read back through the
		// exporter, a rate and the template's humanizePercentage.
		if pct, _ := strconv.ParseFloat(m[1], 64); pct < 100*stallShare-5 || pct > 100*stallShare+5 {
			t.Errorf("description says %s%% stalled; the test writes %.0f%%", m[1], 100*stallShare)
		}
	})

	t.Run("IdlePagesNobody", func(t *testing.T) {
		// Every paging alert fires within its `for:` and a window no
		// longer than it (the rules' windows: 2 to 15 minutes, `for:` 5
		// to 15): Prometheus must have watched the idle Spark that long.
		settle := 2*s.maxFor() + 5*scrapeInterval
		s.waitFor(t, deadline, fmt.Sprintf(`count_over_time(up{instance="idle"}[1h]) >= %d`, int(settle/scrapeInterval)),
			"Prometheus to have watched the idle Spark for %v", settle)

		if pending, err := s.query(`ALERTS{instance="idle", severity=~"warning|critical"}`); err != nil {
			t.Fatal(err)
		} else if len(pending) > 0 {
			t.Errorf("the idle Spark has paging alerts pending or firing: %v", pending)
		}
		for _, a := range s.alerts(t) {
			if a.Labels["instance"] != "idle" {
				continue
			}
			if slices.Contains(a.receiverNames(), "page") {
				t.Errorf("the idle Spark's %s is routed to the page receiver", a.Labels["alertname"])
			} else {
				t.Logf("idle Spark: %s (%s) goes to %v", a.Labels["alertname"], a.Labels["severity"], a.receiverNames())
			}
		}
		if got := s.hooks.find("page", "firing", map[string]string{"instance": "idle"}); len(got) > 0 {
			t.Errorf("the idle Spark paged: %v", got)
		}
	})

	t.Run("PlateauStaysQuiet", func(t *testing.T) {
		// The throttling GPU also sits on the ~100 W plateau: an info note,
		// routed to the quiet receiver and, beside the throttling page,
		// inhibited (examples/alertmanager.yml).
		var plateau alertState
		testexporter.Eventually(t, remaining(deadline), func() bool {
			for _, a := range s.alerts(t) {
				if a.Labels["alertname"] == "SparkGPUPowerPlateau" && a.Labels["instance"] == "throttle" {
					plateau = a
					return true
				}
			}
			return false
		}, "SparkGPUPowerPlateau{instance=throttle} in Alertmanager")
		if got := plateau.receiverNames(); !slices.Equal(got, []string{"quiet"}) || plateau.Labels["severity"] != "info" {
			t.Errorf("the plateau note (severity %s) goes to %v, want info to [quiet]", plateau.Labels["severity"], got)
		}
		if plateau.Status.State != "suppressed" {
			t.Errorf("the plateau note is %s beside SparkGPUThrottling, want suppressed", plateau.Status.State)
		}
		if got := s.hooks.find("page", "firing", map[string]string{"alertname": "SparkGPUPowerPlateau"}); len(got) > 0 {
			t.Errorf("the plateau note paged: %v", got)
		}
	})

	t.Run("OOMKillResolves", func(t *testing.T) {
		if !paged {
			t.Skip("SparkOOMKill never paged")
		}
		// The OOM kill leaves the 10-minute (here 10 s) window: the page
		// receiver, which asks for resolved notifications, is told.
		testexporter.Eventually(t, remaining(deadline), func() bool {
			return len(s.hooks.find("page", "resolved", map[string]string{"alertname": "SparkOOMKill", "instance": "oom"})) > 0
		}, "SparkOOMKill{instance=oom} to be resolved at the page receiver")
	})

	t.Run("Report", func(t *testing.T) {
		// `spark_exporter report` against this Prometheus, after the
		// scenarios: the throttling Spark's report names the episode
		// SparkGPUThrottling paged for, the OOM Spark's counts the kill.
		page := s.hooks.find("page", "firing", map[string]string{"alertname": "SparkGPUThrottling", "instance": "throttle"})
		if len(page) == 0 {
			t.Skip("SparkGPUThrottling never paged")
		}
		pagedAt := page[0].StartsAt
		throttle := runReport(t, s, "throttle")
		var named bool
		for _, e := range throttle.Throttle.Episodes {
			// The alert holds the state for its `for:` before it pages:
			// the episode starts before the alert does and lasts to it.
			if !e.Start.After(pagedAt.Add(2*scrapeInterval)) && (e.Open || !e.End.Before(pagedAt)) {
				named = true
			}
		}
		if !named {
			t.Errorf("no episode of the report %+v covers the page of %v", throttle.Throttle.Episodes, pagedAt)
		}
		if !strings.Contains(throttle.Verdict, "throttled from") || !throttle.Firing("SparkGPUThrottling") {
			t.Errorf("throttling Spark: verdict %q, alerts %+v", throttle.Verdict, throttle.Alerts)
		}
		oom := runReport(t, s, "oom")
		if oom.Memory.OOMKills == nil || *oom.Memory.OOMKills != 1 || !oom.Firing("SparkOOMKill") {
			t.Errorf("OOM Spark: %v OOM kills, alerts %+v; want the one kill and SparkOOMKill", oom.Memory.OOMKills, oom.Alerts)
		}
	})

	t.Run("DashboardQueries", func(t *testing.T) {
		checkDashboard(t, s, root, []string{"eviction", "idle", "oom", "throttle"})
	})
}

// runReport runs `spark_exporter report --json` on one Spark over the whole
// run.
func runReport(t *testing.T, s *stack, instance string) report.Report {
	t.Helper()
	from := s.ready.Add(-time.Minute).Unix()
	cmd := testexporter.Command(t, "report", "--prometheus.url="+s.prom.URL, "--instance="+instance,
		"--from="+strconv.FormatInt(from, 10), "--json")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("report on %s: %v: %s", instance, err, stderr.String())
	}
	var r report.Report
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("report on %s: %v: %s", instance, err, out)
	}
	t.Logf("report on %s: %s", instance, r.Verdict)
	return r
}

// idleTree is a Spark at rest: the Spark fixture's kernel files and
// counters, the idle fixture's meminfo (110 GiB free), and no process.
func idleTree(t *testing.T, root string) string {
	t.Helper()
	dir := testexporter.CopyTree(t, filepath.Join(root, "testdata", "proc", "spark"))
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err == nil {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	meminfo, err := os.ReadFile(filepath.Join(root, "testdata", "proc", "idle", "meminfo"))
	if err != nil {
		t.Fatal(err)
	}
	writeAtomic(t, filepath.Join(dir, "meminfo"), meminfo)
	return dir
}

// writeAtomic replaces a file the exporter may be reading: it never sees a
// half-written one.
func writeAtomic(t testing.TB, path string, data []byte) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// bumpCounter adds one to a counter of a vmstat file.
func bumpCounter(t *testing.T, path, name string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\d+)$`)
	m := line.FindSubmatch(data)
	if m == nil {
		t.Fatalf("no %s in %s", name, filepath.Base(path))
	}
	n, err := strconv.ParseUint(string(m[1]), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	writeAtomic(t, path, line.ReplaceAll(data, fmt.Appendf(nil, "%s %d", name, n+1)))
}

var psiTotal = regexp.MustCompile(`(?m)^(some|full) .* total=(\d+)$`)

// startStall makes a PSI memory file behave as a kernel's does while the
// pool thrashes: until the test ends, its "full" stall total (µs) grows by
// share of wall-clock time and its "some" total by a little more, with the
// averages to match. Totals follow the clock, not the writes, so a late
// write under load does not change the rate Prometheus sees.
func startStall(t *testing.T, path string, share float64) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	totals := map[string]float64{}
	for _, m := range psiTotal.FindAllStringSubmatch(string(data), -1) {
		totals[m[1]], _ = strconv.ParseFloat(m[2], 64)
	}
	if len(totals) != 2 {
		t.Fatalf("%s: want a some and a full line with totals", path)
	}
	shares := map[string]float64{"some": min(1, share+0.1), "full": share}
	start := time.Now()
	write := func() {
		elapsed := time.Since(start).Microseconds()
		var b strings.Builder
		for _, kind := range []string{"some", "full"} {
			pct := 100 * shares[kind]
			fmt.Fprintf(&b, "%s avg10=%.2f avg60=%.2f avg300=%.2f total=%.0f\n",
				kind, pct, pct, pct, totals[kind]+shares[kind]*float64(elapsed))
		}
		writeAtomic(t, path, []byte(b.String()))
	}
	write()
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				write()
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
}

// remaining is the time left until deadline, at least nothing.
func remaining(deadline time.Time) time.Duration { return max(0, time.Until(deadline)) }

// waitFor polls an instant query until it returns something.
func (s *stack) waitFor(t *testing.T, deadline time.Time, expr, format string, args ...any) {
	t.Helper()
	testexporter.Eventually(t, remaining(deadline), func() bool {
		r, err := s.query(expr)
		return err == nil && len(r) > 0
	}, format, args...)
}

// waitPage waits for a firing alert with all of labels at the page
// receiver.
func (s *stack) waitPage(t *testing.T, deadline time.Time, labels map[string]string) alert {
	t.Helper()
	var got []alert
	testexporter.Eventually(t, remaining(deadline), func() bool {
		got = s.hooks.find("page", "firing", labels)
		return len(got) > 0
	}, "%v at the page receiver", labels)
	t.Logf("paged: %s", got[0].Annotations["description"])
	return got[0]
}

// runbookCheck knows where runbook links must lead: the base_url the rules
// record, and the headings of docs/runbooks.md.
type runbookCheck struct {
	base    string
	anchors map[string]bool
}

func (s *stack) runbooks(t *testing.T, deadline time.Time, root string) runbookCheck {
	t.Helper()
	var base string
	testexporter.Eventually(t, remaining(deadline), func() bool {
		r, err := s.query("spark:runbooks:info")
		if err != nil || len(r) == 0 {
			return false
		}
		base = r[0].Metric["base_url"]
		return true
	}, "the spark:runbooks:info rule to be evaluated")
	doc, err := os.ReadFile(filepath.Join(root, "docs", "runbooks.md"))
	if err != nil {
		t.Fatal(err)
	}
	return runbookCheck{base, mdanchor.Anchors(doc)}
}

// rawFigure is a float as Go prints it unformatted: 2.1990232064e+10.
var rawFigure = regexp.MustCompile(`\d\.\d+e[+-]\d+`)

// check asserts what every page must carry: a summary naming the Spark, a
// description whose templates all rendered, and a runbook link to the
// alert's own section of docs/runbooks.md.
func (rc runbookCheck) check(t *testing.T, a alert, anchor string) {
	t.Helper()
	if s := a.Annotations["summary"]; !strings.Contains(s, a.Labels["instance"]) {
		t.Errorf("summary %q does not name the Spark %q", s, a.Labels["instance"])
	}
	d := a.Annotations["description"]
	for _, bad := range []string{"<no value>", "{{", "%!", "NaN", "Inf"} {
		if strings.Contains(d, bad) {
			t.Errorf("description holds %q, a template that did not render or a figure that makes no sense: %s", bad, d)
		}
	}
	if raw := rawFigure.FindString(d); raw != "" {
		t.Errorf("description holds %s, a figure not humanised: %s", raw, d)
	}
	if want := rc.base + "#" + anchor; a.Annotations["runbook_url"] != want {
		t.Errorf("runbook_url %q, want %q", a.Annotations["runbook_url"], want)
	}
	if rc.base == "" || !rc.anchors[anchor] {
		t.Errorf("runbook link %s#%s does not resolve: no such heading in docs/runbooks.md", rc.base, anchor)
	}
}

// matches asserts that text matches the regular expression and returns the
// submatches.
func matches(t *testing.T, text, expr string) []string {
	t.Helper()
	m := regexp.MustCompile(expr).FindStringSubmatch(text)
	if m == nil {
		t.Errorf("%q does not match %s", text, expr)
	}
	return m
}
