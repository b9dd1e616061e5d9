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

	"github.com/spark-exporter/spark_exporter/internal/judge"
	"github.com/spark-exporter/spark_exporter/internal/report"
	"github.com/spark-exporter/spark_exporter/internal/testing/fakeengine"
	"github.com/spark-exporter/spark_exporter/internal/testing/fakeproc"
	"github.com/spark-exporter/spark_exporter/internal/testing/mdanchor"
	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
)

// Every wait has a deadline of its own, derived from the scenario: the
// moment its event is due — the start of a stimulus plus what the scenario
// and the shortened rules make it take (a scenario minute, an alert's
// `for:` and window) — stretched by dueSlack, plus dueAllowance for the
// chain's fixed delays (scrapes, rule evaluation, Alertmanager's
// group_wait, a busy 2-core machine). A wait fails once its own event is
// overdue, not when an unrelated one has used up a shared budget.
const (
	dueSlack     = 3
	dueAllowance = 30 * time.Second
)

// due is the deadline of a wait for an event expected within expected of
// from.
func due(from time.Time, expected time.Duration) time.Time {
	return from.Add(dueSlack*expected + dueAllowance)
}

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
	leak := idleTree(t, root)
	contended, contendedArgs, calm, calmArgs := preemptingTrees(t, root)
	hang, hangScenario := hangingGPU(t, root)

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
		// GPUs as real units' captures show them (the scenarios name
		// their sources): a healthy sustained load on the power cap, a
		// decode bound by memory bandwidth, the USB-PD fault.
		{instance: "sustained", procfs: idleTree(t, root), nvml: "gb10-sustained-load"},
		{instance: "decode", procfs: idleTree(t, root), nvml: "gb10-memory-bound-decode"},
		{instance: "usbpd", procfs: idleTree(t, root), nvml: "gb10-usb-pd-stuck"},
		// The verdict's cases (issue 26): a warm-up at a flat ~90 W, a
		// steady 88 °C run with a steady clock and counter blips are never
		// throttled; a clock falling 2.45 -> 2.0 GHz at 90 °C and flat
		// power is, with the driver's counters growing or without them.
		{instance: "warmup", procfs: idleTree(t, root), nvml: "gb10-warmup-flat-90w"},
		{instance: "hot", procfs: idleTree(t, root), nvml: "gb10-steady-88c"},
		{instance: "blips", procfs: idleTree(t, root), nvml: "gb10-counter-blips"},
		{instance: "clockfall", procfs: idleTree(t, root), nvml: "gb10-clock-falls-flat-power"},
		{instance: "clockonly", procfs: idleTree(t, root), nvml: "gb10-clock-fall-no-counters"},
		// A Spark whose exporter the test stops: a wedged host, as
		// Prometheus sees it.
		{instance: "wedged", procfs: idleTree(t, root), nvml: "gb10-idle"},
		// A Spark whose free memory the test drives: a model load, then a
		// steady leak.
		{instance: "leak", procfs: leak, nvml: "gb10-idle"},
		// Inference engines preempting requests (fake vLLMs): beside a
		// trainer, and alone on a calm pool. Prometheus also scrapes the
		// contended one's engine through /sd/engines.
		{instance: "contended", procfs: contended, nvml: "gb10-idle", sd: true, args: contendedArgs},
		{instance: "calm", procfs: calm, nvml: "gb10-idle", args: calmArgs},
		// A Spark whose GPU driver the test wedges. --gpu.timeout under the
		// 1 s scrape timeout, so that the scrape answers through the hang.
		{instance: "hung", procfs: idleTree(t, root), nvml: hangScenario, args: []string{"--gpu.timeout=250ms"}},
	}
	s := startStack(t, targets)
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
	s.waitFor(t, due(s.ready, window+2*scrapeInterval), fmt.Sprintf(`count_over_time(spark_pool_oom_kills_total{instance="oom"}[1h]) > %d`, int(window/scrapeInterval)+1),
		"Prometheus to hold the OOM Spark's counter for %v", window)
	bumpCounter(t, filepath.Join(oom, "vmstat"), "oom_kill")
	killed := time.Now()

	// The wedged Spark's stimulus: its exporter stops answering, as the
	// exporter of a frozen host does.
	s.waitFor(t, due(s.ready, 3*scrapeInterval), `count_over_time(spark_exporter_build_info{instance="wedged"}[1h]) >= 3`,
		"Prometheus to have scraped the wedged Spark a few times")
	stopped := time.Now()
	s.exporters["wedged"].Stop(t)

	// The leaking Spark's: usable memory falls as in a model load, levels
	// off at a serving idle, then an engine creeps. The test holds the
	// schedule, so it knows the usable memory at any moment.
	pool := startPoolSchedule(t, leak, filepath.Join(root, "testdata", "proc", "spark", "2101"))

	// The hung Spark's: its driver stops answering NVML's device queries,
	// once Prometheus has seen it answer.
	s.waitFor(t, due(s.ready, 3*scrapeInterval), `count_over_time(spark_gpu_nvml_stalled_seconds{instance="hung"}[1h]) >= 3`,
		"Prometheus to have seen the hung Spark's driver answer")
	if err := os.WriteFile(hang, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	wedged := time.Now()

	runbooks := s.runbooks(t, due(s.ready, scrapeInterval), root)

	paged := false
	t.Run("OOMKill", func(t *testing.T) {
		a := s.waitPage(t, due(killed, s.firesWithin("SparkOOMKill")), map[string]string{
			"alertname": "SparkOOMKill", "instance": "oom", "job": "spark", "severity": "critical",
		})
		paged = true
		runbooks.check(t, a, "sparkoomkill")
		// The fixture's MemFree, 21474836 kB, humanised.
		matches(t, a.Annotations["description"],
			`^The kernel OOM killer ended a process in the last 10 minutes \(\d+ since boot\); free memory is now 20\.48GiB\. `)
	})

	t.Run("HostSilent", func(t *testing.T) {
		a := s.waitPage(t, due(stopped, s.firesWithin("SparkHostSilent")), map[string]string{
			"alertname": "SparkHostSilent", "instance": "wedged", "job": "spark", "severity": "critical",
		})
		t.Logf("page seen %v after the exporter stopped (a 2-minute `for:` here %v)", time.Since(stopped).Round(100*time.Millisecond), 2*time.Minute/speedup)
		runbooks.check(t, a, "sparkhostsilent")
		matches(t, a.Annotations["description"], `^The exporter on wedged answered until recently`)
		if got := s.hooks.find("page", "firing", map[string]string{"alertname": "SparkHostSilent", "instance": "idle"}); len(got) > 0 {
			t.Errorf("a Spark that answers is reported silent: %v", got)
		}
	})

	t.Run("GPUDriverHung", func(t *testing.T) {
		// The stall counts real seconds, the threshold is not shortened:
		// the page comes once the call has waited that long and the
		// shortened `for:` has passed.
		threshold := time.Duration(judge.NVMLStalledSeconds) * time.Second
		a := s.waitPage(t, due(wedged, threshold+s.firesWithin("SparkGPUDriverHung")), map[string]string{
			"alertname": "SparkGPUDriverHung", "instance": "hung", "job": "spark", "severity": "critical",
		})
		t.Logf("page seen %v after the driver stopped answering", time.Since(wedged).Round(100*time.Millisecond))
		runbooks.check(t, a, "sparkgpudriverhung")
		m := matches(t, a.Annotations["description"], `^The GPU driver has not answered an NVML call for (\d+s|\d+m \d+s): it is wedged`)
		if m != nil {
			if d, err := time.ParseDuration(strings.ReplaceAll(m[1], " ", "")); err != nil || d <= threshold {
				t.Errorf("the page says the call waited %s; it pages past %v", m[1], threshold)
			}
		}
		// Through the hang every scrape answered within Prometheus's
		// timeout, with the pool's series.
		since := fmt.Sprintf("[%ds]", int(time.Since(wedged).Seconds()))
		if got, err := s.query(`min_over_time(up{instance="hung"}` + since + `) == 1 and on (instance, job) min_over_time(spark_scrape_collector_success{instance="hung",collector="pool"}` + since + `) == 1`); err != nil {
			t.Fatal(err)
		} else if len(got) == 0 {
			t.Error("a scrape of the hung Spark failed, or its pool collector did, while the driver hung")
		}
		// The failing gpu collector it explains is inhibited
		// (examples/alertmanager.yml).
		testexporter.Eventually(t, remaining(due(wedged, threshold+s.firesWithin("SparkExporterCollectorFailing"))), func() bool {
			for _, a := range s.alerts(t) {
				if a.Labels["alertname"] == "SparkExporterCollectorFailing" && a.Labels["instance"] == "hung" && a.Labels["collector"] == "gpu" {
					return a.Status.State == "suppressed"
				}
			}
			return false
		}, "SparkExporterCollectorFailing{instance=hung,collector=gpu} suppressed beside SparkGPUDriverHung")
	})

	t.Run("GPUThrottling", func(t *testing.T) {
		// Warm-up (power near its peak, temperature rising: watching, not
		// throttling) until scenario minute 20, then a flat ~100 W with
		// the temperature climbing, the clock falling and, from minute 35,
		// the driver slowing the clocks for heat: the thermal collector
		// calls it throttled, held 5 minutes.
		a := s.waitPage(t, due(s.ready, 35*perScenarioMinute+thermalWindow+s.firesWithin("SparkGPUThrottling")), map[string]string{
			"alertname": "SparkGPUThrottling", "instance": "throttle", "job": "spark", "severity": "warning",
			"gpu": "0", "signal": "thermal_state",
		})
		runbooks.check(t, a, "sparkgputhrottling")
		m := matches(t, a.Annotations["description"],
			`^The exporter judges GPU 0 throttled: its clocks are being lost to heat .*, now at (\d+) °C, (\d+) °C below its limit, SM clock ([0-9.]+) GHz\.`)
		if m == nil {
			return
		}
		// Temperature: 77 °C at minute 20, 95 °C at the end; the margin
		// is 94 °C less the temperature; the clock, 2.32 GHz at minute 20,
		// falls to 1.61.
		c, _ := strconv.Atoi(m[1])
		if c < 77 || c > 95 {
			t.Errorf("description says %d °C; the scenario is between 77 and 95 °C on its plateau", c)
		}
		if margin, _ := strconv.Atoi(m[2]); c+margin != 94 {
			t.Errorf("description says %d °C with %d °C of margin; the scenario's limit is 94 °C", c, margin)
		}
		if ghz, _ := strconv.ParseFloat(m[3], 64); ghz < 1.6 || ghz > 2.33 {
			t.Errorf("description says the SM clock is at %s GHz; the scenario's plateau is at 1.61 to 2.32", m[3])
		}
	})

	t.Run("GPUThrottlingFromCounters", func(t *testing.T) {
		// From scenario minute 35 the driver slows the clocks for heat a
		// quarter of the time, then half, with every clock event flag
		// clear (the stand-in's GB10 default): the counters are the only
		// word from NVML. The thermal collector reads them as throttling
		// and pages through its state; the counter rule, for exporters
		// without the collector, stays out of it.
		s.waitFor(t, due(s.ready, 35*perScenarioMinute+thermalWindow), `max_over_time(spark_thermal_state{instance="throttle",state="throttled"}[1h]) == 1`,
			"spark_thermal_state{instance=throttle} to reach throttled")
		if flags, err := s.query(`max_over_time(spark_gpu_clocks_event_active{instance="throttle",reason=~"sw_thermal_slowdown|hw_thermal_slowdown"}[1h]) > 0`); err != nil {
			t.Fatal(err)
		} else if len(flags) > 0 {
			t.Errorf("a thermal slowdown flag was set; the scenario keeps them clear: %v", flags)
		}
		// Until scenario minute 50: the counters have grown for 25% of the
		// time for 15 minutes, past the counter rule's window and `for:`.
		s.waitFor(t, due(s.ready, 50*perScenarioMinute+thermalWindow), `sum_over_time(spark_thermal_state{instance="throttle",state="throttled"}[1h]) >= 15`,
			"the throttle Spark to have been throttled for 15 scenario minutes")
		if got, err := s.query(`max_over_time(ALERTS{alertname="SparkGPUThrottling",instance="throttle",signal!="thermal_state"}[1h])`); err != nil {
			t.Fatal(err)
		} else if len(got) > 0 {
			t.Errorf("SparkGPUThrottling from NVML's counters or flags beside the thermal collector's state: %v", got)
		}
	})

	// 90 °C at a flat ~90 W, the clock falling 2.45 -> 2.0 GHz: from
	// scenario minute 10 with the driver's counters growing a quarter of the
	// time (clockfall), from minute 20 on a driver without counters, the
	// clock alone (clockonly). Throttled within a window of the fall
	// (TestStandInScenarios) and paged.
	for _, c := range []struct {
		fall string
		at   time.Duration
	}{{"clockfall", 10 * perScenarioMinute}, {"clockonly", 20 * perScenarioMinute}} {
		fall, at := c.fall, c.at
		t.Run("GPUThrottlingWhenTheClockFalls/"+fall, func(t *testing.T) {
			a := s.waitPage(t, due(s.ready, at+thermalWindow+s.firesWithin("SparkGPUThrottling")), map[string]string{
				"alertname": "SparkGPUThrottling", "instance": fall, "job": "spark", "severity": "warning",
				"gpu": "0", "signal": "thermal_state",
			})
			runbooks.check(t, a, "sparkgputhrottling")
			m := matches(t, a.Annotations["description"], `, now at (\d+) °C, (\d+) °C below its limit, SM clock ([0-9.]+) GHz\.`)
			if m == nil {
				return
			}
			if c, _ := strconv.Atoi(m[1]); c < 89 || c > 91 {
				t.Errorf("description says %d °C; the scenario holds 90 °C", c)
			}
			if ghz, _ := strconv.ParseFloat(m[3], 64); ghz > 2.35 {
				t.Errorf("description says the SM clock is at %s GHz; it pages after the fall to 2.0", m[3])
			}
		})
	}

	t.Run("GPUPowerStuckLow", func(t *testing.T) {
		// The USB-PD capture: 96% busy at 5.8-19.5 W and 481-858 MHz.
		a := s.waitPage(t, due(s.ready, s.firesWithin("SparkGPUPowerStuckLow")), map[string]string{
			"alertname": "SparkGPUPowerStuckLow", "instance": "usbpd", "job": "spark", "severity": "warning", "gpu": "0",
		})
		runbooks.check(t, a, "sparkgpupowerstucklow")
		matches(t, a.Annotations["description"], `^GPU 0 is busy but draws only (\d|1\d) W, with its SM clock at \d+(\.\d+)?% of its maximum\.`)
	})

	t.Run("PoolExhaustion", func(t *testing.T) {
		// The model load: usable memory drops 86 GiB in two (scenario)
		// minutes, then levels off at a serving idle (26 GiB) for 25
		// minutes, longer than the alert's `for:` and short window
		// together. Until the creep starts, no pool alert may have fired.
		if settle := pool.loadFor + 2*s.forOf(t, "SparkPoolExhaustionImminent"); pool.leakStart.Sub(pool.loadStart) <= settle {
			t.Fatalf("the pause after the load (%v) is not longer than the load and twice the alert's `for:` (%v)", pool.leakStart.Sub(pool.loadStart), settle)
		}
		testexporter.Eventually(t, remaining(due(pool.leakStart, 2*scrapeInterval)), func() bool { return time.Now().After(pool.leakStart.Add(2 * scrapeInterval)) },
			"the model load and its pause to pass")
		during := fmt.Sprintf(`max_over_time(ALERTS{alertname=~"SparkPoolExhaustionImminent|SparkPoolUsableLow|SparkPoolUsableCritical",instance="leak",alertstate="firing"}[%ds] @ %d)`,
			int(pool.leakStart.Sub(pool.start).Seconds())+2, pool.leakStart.Unix())
		if fired, err := s.query(during); err != nil {
			t.Fatal(err)
		} else if len(fired) > 0 {
			t.Errorf("the model load and the serving idle after it fired a pool alert: %v", fired)
		}
		// The creep: 0.7 GiB a (scenario) minute, the owner's 21 GiB per
		// 30 minutes, in the engine's resident memory. The warning must
		// come while ten minutes of it are left, the critical page before
		// the pool is gone, each naming the engine that grew.
		for _, step := range []struct {
			alert, severity, anchor string
			minutesLeft             float64
		}{
			{"SparkPoolUsableLow", "warning", "sparkpoolusablelow", 10},
			{"SparkPoolUsableCritical", "critical", "sparkpoolusablecritical", 5},
		} {
			a := s.waitPage(t, due(pool.leakStart, pool.creepFor+s.firesWithin(step.alert)), map[string]string{
				"alertname": step.alert, "instance": "leak", "job": "spark", "severity": step.severity,
			})
			usable := pool.usableAt(time.Now())
			left := float64(usable) / (1 << 30) / pool.creepGiBPerMinute
			t.Logf("%s paged with %.1f GiB usable, %.1f scenario minutes before the pool is gone", step.alert, float64(usable)/(1<<30), left)
			if left < step.minutesLeft {
				t.Errorf("%s paged with %.1f minutes of usable memory left, want at least %.0f", step.alert, left, step.minutesLeft)
			}
			runbooks.check(t, a, step.anchor)
			matches(t, a.Annotations["description"], `^Only [0-9.]+GiB of the unified pool is usable .* The workload whose memory grew most in the last 30 minutes: vllm \(pid 2101\), \+[0-9.]+GiB resident\.`)
		}
		// SparkPoolExhaustionImminent fired on the creep too (in Prometheus;
		// Alertmanager folds it into the usable page, as the example's
		// inhibitions say), before usable memory reached the critical tier.
		fired := fmt.Sprintf(`max_over_time(ALERTS{alertname="SparkPoolExhaustionImminent",instance="leak",alertstate="firing"}[%ds])`,
			int(time.Since(pool.leakStart).Seconds())+2)
		if v, err := s.query(fired); err != nil {
			t.Fatal(err)
		} else if len(v) == 0 {
			t.Error("the creep never fired SparkPoolExhaustionImminent")
		}
	})

	t.Run("MemoryEviction", func(t *testing.T) {
		a := s.waitPage(t, due(s.ready, s.firesWithin("SparkMemoryEviction")), map[string]string{
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

	// A Spark at rest, a healthy sustained load on the power cap, a
	// memory-bound decode, a warm-up at flat power, a steady 88 °C run and
	// counter blips page nobody.
	for _, quiet := range []string{"idle", "sustained", "decode", "warmup", "hot", "blips", "calm"} {
		t.Run("PagesNobody/"+quiet, func(t *testing.T) {
			// Every paging alert fires within its `for:` and a window no
			// longer than it (the rules' windows: 2 to 30 minutes, `for:`
			// 2 to 15): Prometheus must have watched the Spark that long.
			settle := 2*s.maxFor() + 5*scrapeInterval
			s.waitFor(t, due(s.ready, settle), fmt.Sprintf(`count_over_time(up{instance=%q}[1h]) >= %d`, quiet, int(settle/scrapeInterval)),
				"Prometheus to have watched the %s Spark for %v", quiet, settle)

			if pending, err := s.query(fmt.Sprintf(`ALERTS{instance=%q, severity=~"warning|critical"}`, quiet)); err != nil {
				t.Fatal(err)
			} else if len(pending) > 0 {
				t.Errorf("the %s Spark has paging alerts pending or firing: %v", quiet, pending)
			}
			for _, a := range s.alerts(t) {
				if a.Labels["instance"] != quiet {
					continue
				}
				if slices.Contains(a.receiverNames(), "page") {
					t.Errorf("the %s Spark's %s is routed to the page receiver", quiet, a.Labels["alertname"])
				} else {
					t.Logf("%s Spark: %s (%s) goes to %v", quiet, a.Labels["alertname"], a.Labels["severity"], a.receiverNames())
				}
			}
			if got := s.hooks.find("page", "firing", map[string]string{"instance": quiet}); len(got) > 0 {
				t.Errorf("the %s Spark paged: %v", quiet, got)
			}
		})
	}

	// Hot or climbing at flat power with the clock holding is watching
	// ("hot, clock holding"), never throttled, however long it lasts.
	for _, healthy := range []string{"warmup", "hot", "blips"} {
		t.Run("NeverThrottled/"+healthy, func(t *testing.T) {
			// The scenarios' warm-up, hot hour and blips play within their
			// first 30 scenario minutes.
			s.waitFor(t, due(s.ready, 30*perScenarioMinute+2*scrapeInterval), fmt.Sprintf(`count_over_time(spark_thermal_state{instance=%q,state="throttled"}[1h]) >= 30`, healthy),
				"Prometheus to have watched the %s Spark's thermal state for 30 scenario minutes", healthy)
			if got, err := s.query(fmt.Sprintf(`max_over_time(spark_thermal_state{instance=%q,state="throttled"}[1h]) > 0`, healthy)); err != nil {
				t.Fatal(err)
			} else if len(got) > 0 {
				t.Errorf("the %s Spark was throttled: %v", healthy, got)
			}
		})
	}

	t.Run("SustainedLoadIsThePlateauNote", func(t *testing.T) {
		// Only sw_power_cap grows: the plateau note, from the counter,
		// shown (nothing inhibits it) and routed to the quiet receiver.
		var plateau alertState
		testexporter.Eventually(t, remaining(due(s.ready, s.firesWithin("SparkGPUPowerPlateau"))), func() bool {
			for _, a := range s.alerts(t) {
				if a.Labels["alertname"] == "SparkGPUPowerPlateau" && a.Labels["instance"] == "sustained" {
					plateau = a
					return true
				}
			}
			return false
		}, "SparkGPUPowerPlateau{instance=sustained} in Alertmanager")
		if plateau.Labels["signal"] != "sw_power_cap_counter" || plateau.Status.State != "active" ||
			!slices.Equal(plateau.receiverNames(), []string{"quiet"}) {
			t.Errorf("the plateau note: signal %q, state %s, receivers %v; want sw_power_cap_counter, active, [quiet]",
				plateau.Labels["signal"], plateau.Status.State, plateau.receiverNames())
		}
	})

	t.Run("PlateauStaysQuiet", func(t *testing.T) {
		// The throttling GPU also sits on the ~100 W plateau: an info note,
		// routed to the quiet receiver and, beside the throttling page,
		// inhibited (examples/alertmanager.yml).
		var plateau alertState
		testexporter.Eventually(t, remaining(due(s.ready, 20*perScenarioMinute+s.firesWithin("SparkGPUPowerPlateau"))), func() bool {
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

	t.Run("InferencePreempting", func(t *testing.T) {
		a := s.waitPage(t, due(s.ready, s.firesWithin("SparkInferencePreempting")+2*scrapeInterval), map[string]string{
			"alertname": "SparkInferencePreempting", "instance": "contended", "job": "spark", "severity": "warning",
			"kind": "vllm", "pid": "2101",
		})
		runbooks.check(t, a, "sparkinferencepreempting")
		matches(t, a.Annotations["description"], `^vllm \(pid 2101, container 8dfafdbc3a40\) preempted \d+ request\(s\) in 5 minutes.* Beside it runs trl \(pid 2301\)`)
		// The engine's own metrics, scraped through /sd/engines with the
		// labels it lists.
		s.waitFor(t, due(s.ready, 10*scrapeInterval), `up{job="spark-engines",kind="vllm",pid="2101"} == 1 and on (instance) vllm:num_preemptions_total{job="spark-engines"} > 0`,
			"Prometheus to scrape the engine that /sd/engines lists")
	})

	t.Run("OOMKillResolves", func(t *testing.T) {
		if !paged {
			t.Skip("SparkOOMKill never paged")
		}
		// The OOM kill leaves the 10-minute (here 10 s) window: the page
		// receiver, which asks for resolved notifications, is told.
		testexporter.Eventually(t, remaining(due(killed, s.firesWithin("SparkOOMKill")+alertmanagerResolve)), func() bool {
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
		if !strings.Contains(throttle.Verdict, "throttled from") || !firing(throttle, "SparkGPUThrottling") {
			t.Errorf("throttling Spark: verdict %q, alerts %+v", throttle.Verdict, throttle.Alerts)
		}
		oom := runReport(t, s, "oom")
		if oom.Memory.OOMKills == nil || *oom.Memory.OOMKills != 1 || !firing(oom, "SparkOOMKill") {
			t.Errorf("OOM Spark: %v OOM kills, alerts %+v; want the one kill and SparkOOMKill", oom.Memory.OOMKills, oom.Alerts)
		}
	})

	t.Run("DashboardQueries", func(t *testing.T) {
		checkDashboard(t, s, root, []string{"blips", "calm", "clockfall", "clockonly", "contended", "decode", "eviction", "hot", "hung", "idle", "leak", "oom", "sustained", "throttle", "usbpd", "warmup", "wedged"})
	})
}

// runReport runs `spark_exporter report --json` on one Spark over the whole
// run.
func firing(r report.Report, name string) bool {
	return slices.ContainsFunc(r.Alerts, func(a report.Alert) bool { return a.Name == name })
}

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
// preemptingTrees are two /proc trees with a vLLM server answering, on a
// fake engine, that it preempts requests and generates tokens at every
// question: one beside the Spark fixture's trainer, in a Docker container
// the fake Docker Engine names; one alone on an idle Spark, beside an
// Ollama holding a model. The args are each exporter's.
func preemptingTrees(t *testing.T, root string) (contended string, contendedArgs []string, calm string, calmArgs []string) {
	t.Helper()
	const id = "8dfafdbc3a40f1a5b7d2d4a8bb7c3f9b0e1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e"
	busy := fakeengine.Figures{KVCache: 0.99, Running: 8, Waiting: 20, Model: "Qwen/Qwen3-32B-AWQ",
		PreemptionsPerAnswer: 3, GenTokensPerAnswer: 400, PromptTokensPerAnswer: 900}
	contended = testexporter.CopyTree(t, filepath.Join(root, "testdata", "proc", "spark"))
	beside := fakeengine.Start(t, "vllm", busy)
	cmdline := filepath.Join(contended, "2101", "cmdline")
	data, err := os.ReadFile(cmdline)
	if err != nil {
		t.Fatal(err)
	}
	writeAtomic(t, cmdline, append(data, []byte("--port\x00"+beside.Port()+"\x00")...))
	fakeproc.Listen(t, contended, 2101, port(t, beside.Port()))
	writeAtomic(t, filepath.Join(contended, "2101", "cgroup"), []byte("0::/system.slice/docker-"+id+".scope\n"))
	docker := fakeengine.StartDocker(t, id, "vllm-1", "vllm/vllm-openai:latest", "vllm")
	contendedArgs = []string{"--workloads.docker-socket=" + docker}

	calm = idleTree(t, root)
	alone := fakeengine.Start(t, "vllm", busy)
	server := fakeproc.VLLMServer
	server.PPID = 1
	server.Argv = append(server.Argv, "--port", alone.Port())
	server.Write(t, calm)
	fakeproc.Listen(t, calm, server.PID, port(t, alone.Port()))
	ollama := fakeengine.Start(t, "ollama", fakeengine.Figures{Model: "llama3.1:8b", ModelBytes: 5e9, ExpiresAt: time.Now().Add(time.Hour)})
	fakeproc.Process{PID: 3001, PPID: 1, Comm: "ollama", Start: 5000000, RSSKB: 1 << 20,
		Argv: []string{"/usr/local/bin/ollama", "serve"}}.Write(t, calm)
	fakeproc.Listen(t, calm, 3001, port(t, ollama.Port()))
	calmArgs = []string{"--engines.target=ollama=" + ollama.Address()}
	return contended, contendedArgs, calm, calmArgs
}

// hangingGPU is an idle GB10's scenario whose device queries block while
// the file hang exists.
func hangingGPU(t *testing.T, root string) (hang, scenario string) {
	t.Helper()
	idle, err := os.ReadFile(filepath.Join(root, "testdata", "nvml", "scenarios", "gb10-idle.scenario"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	hang, scenario = filepath.Join(dir, "wedged"), filepath.Join(dir, "hang.scenario")
	if err := os.WriteFile(scenario, append([]byte("hang file "+hang+"\n"), idle...), 0o644); err != nil {
		t.Fatal(err)
	}
	return hang, scenario
}

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

// writeInPlace overwrites a file from its start without truncating it, for
// a file the exporter holds open; data must be as long as the file.
func writeInPlace(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
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

// firesWithin is how long an alert's condition must hold before it fires on
// the faster clock: its longest `for:` and its longest range window.
func (s *stack) firesWithin(alert string) time.Duration {
	var forOf, window time.Duration
	for _, c := range s.rules {
		if c.Rule != alert {
			continue
		}
		switch c.Field {
		case "for":
			forOf = max(forOf, c.Parsed())
		case "expr":
			window = max(window, c.Parsed())
		}
	}
	return forOf + window
}

// thermalWindow is the thermal collector's window in the run (thermalFlags).
var thermalWindow = func() time.Duration {
	for _, f := range thermalFlags {
		if v, ok := strings.CutPrefix(f, "--thermal.window="); ok {
			if d, err := time.ParseDuration(v); err == nil {
				return d
			}
		}
	}
	panic("thermalFlags set no --thermal.window")
}()

// alertmanagerResolve is how late a resolved notification may come:
// examples/alertmanager.yml's group_interval (5m) on the faster clock.
const alertmanagerResolve = 5 * time.Minute / speedup

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

// poolSchedule drives a Spark's meminfo, and the resident memory of its
// engine (a vLLM process), as the owner's Spark moved (docs/design.md,
// "Budget with free"): a model load (usable memory down 86 GiB in two
// scenario minutes, to a serving idle of 26 GiB), a pause, then the
// engine's creep of 0.7 GiB a scenario minute (21 GiB per 30 minutes) down
// to nothing. Free CMA stays at the owner's idle 0.13 GiB, so usable is
// MemAvailable less that. The figures follow the clock, not the writes.
type poolSchedule struct {
	start, loadStart, leakStart time.Time
	loadFor, creepFor           time.Duration
	before, after               int64 // usable bytes before and after the load
	creepGiBPerMinute           float64
}

const perScenarioMinute = time.Minute / speedup

// cmaFreeBytes is the free CMA of the schedule's meminfo (0.13 GiB).
const cmaFreeBytes = 136315 << 10

func (p *poolSchedule) usableAt(now time.Time) int64 {
	switch {
	case now.Before(p.loadStart):
		return p.before
	case now.Before(p.loadStart.Add(p.loadFor)):
		f := float64(now.Sub(p.loadStart)) / float64(p.loadFor)
		return p.before - int64(f*float64(p.before-p.after))
	case now.Before(p.leakStart):
		return p.after
	}
	return max(0, p.after-p.grownAt(now))
}

// grownAt is what the engine has grown by since the creep began.
func (p *poolSchedule) grownAt(now time.Time) int64 {
	if now.Before(p.leakStart) {
		return 0
	}
	return int64(float64(now.Sub(p.leakStart)) / float64(perScenarioMinute) * p.creepGiBPerMinute * (1 << 30))
}

var (
	memAvailable = regexp.MustCompile(`(?m)^MemAvailable:\s+(\d+) kB$`)
	memFree      = regexp.MustCompile(`(?m)^MemFree:\s+\d+ kB$`)
	cmaLines     = regexp.MustCompile(`(?m)^CmaTotal:\s+\d+ kB\nCmaFree:\s+\d+ kB$`)
	vmRSS        = regexp.MustCompile(`(?m)^VmRSS:\s+\d+ kB$`)
)

// startPoolSchedule plays the schedule on the /proc tree dir until the test
// ends: its meminfo, and a vLLM process copied from engine (a /proc/PID
// directory) whose VmRSS grows with the creep. The pause after the load
// lasts 25 scenario minutes: longer than SparkPoolExhaustionImminent's
// `for:` and short window together.
func startPoolSchedule(t *testing.T, dir, engine string) *poolSchedule {
	t.Helper()
	path := filepath.Join(dir, "meminfo")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := memAvailable.FindSubmatch(data)
	if m == nil || !memFree.Match(data) || !cmaLines.Match(data) {
		t.Fatalf("%s: no MemAvailable, MemFree or CmaTotal and CmaFree lines", path)
	}
	data = cmaLines.ReplaceAll(data, fmt.Appendf(nil, "CmaTotal:       %d kB\nCmaFree:        %d kB", 10<<20, cmaFreeBytes>>10))
	// The engine appears whole, its VmRSS at the width every write keeps
	// (writeInPlace): made beside the PID directories, then renamed in.
	engineDir := filepath.Join(dir, filepath.Base(engine))
	staging := filepath.Join(dir, "engine-staging")
	if err := os.CopyFS(staging, os.DirFS(engine)); err != nil {
		t.Fatal(err)
	}
	status, err := os.ReadFile(filepath.Join(staging, "status"))
	if err != nil || !vmRSS.Match(status) {
		t.Fatalf("%s: no VmRSS line (%v)", engine, err)
	}
	status = vmRSS.ReplaceAll(status, fmt.Appendf(nil, "VmRSS:\t%8d kB", 20<<20))
	if err := os.WriteFile(filepath.Join(staging, "status"), status, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(staging, engineDir); err != nil {
		t.Fatal(err)
	}
	kb, _ := strconv.ParseInt(string(m[1]), 10, 64)
	now := time.Now()
	p := &poolSchedule{start: now, loadStart: now, loadFor: 2 * perScenarioMinute,
		before: kb<<10 - cmaFreeBytes, after: 26 << 30, creepGiBPerMinute: 0.7}
	p.leakStart = p.loadStart.Add(p.loadFor + 25*perScenarioMinute)
	p.creepFor = time.Duration(float64(p.after) / (1 << 30) / p.creepGiBPerMinute * float64(perScenarioMinute))
	const engineBase = 20 << 30 // the engine's resident memory before the creep
	write := func() {
		now := time.Now()
		available := p.usableAt(now) + cmaFreeBytes
		// The page cache is small here: free memory follows available.
		free := max(available-(2<<30), 512<<20)
		out := memAvailable.ReplaceAll(data, fmt.Appendf(nil, "MemAvailable:   %d kB", available>>10))
		out = memFree.ReplaceAll(out, fmt.Appendf(nil, "MemFree:        %d kB", free>>10))
		writeAtomic(t, path, out)
		// In place, not by rename: the exporter keeps a known process's
		// status open and rereads it, as the kernel's file answers anew. The
		// line keeps its width, so the file keeps its length.
		rss := vmRSS.ReplaceAll(status, fmt.Appendf(nil, "VmRSS:\t%8d kB", (engineBase+p.grownAt(now))>>10))
		if err := writeInPlace(filepath.Join(engineDir, "status"), rss); err != nil {
			t.Error(err)
		}
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
	return p
}

func port(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
