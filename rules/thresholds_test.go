package rules_test

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spark-exporter/spark_exporter/internal/judge"
	"github.com/spark-exporter/spark_exporter/internal/testing/promqltest"
)

// constant is a threshold the rules must write as internal/judge has it.
type constant struct {
	name  string
	value float64
}

// Structural comparisons test a 0/1 gauge or a count against 0 or 1; they
// are not thresholds anyone tunes.
var (
	zero = constant{"0 (a count, or a 0/1 gauge)", 0}
	one  = constant{"1 (a 0/1 gauge)", 1}
	// Headroom is already net of the reserve: below 0 is below it.
	noHeadroom = constant{"0 (headroom is net of --pool.reserve)", 0}
)

// thresholds is every comparison with a number in spark.rules.yml, by
// alert (#n: its nth rule) or recording rule, compared expression and
// operator, with the constant of internal/judge it must equal.
var thresholds = map[string]constant{
	`SparkPoolUsableLow#1 spark_pool_usable_bytes <`:                                                                                                  {"judge.UsableLowBytes", judge.UsableLowBytes},
	`SparkPoolUsableCritical#1 spark_pool_usable_bytes <`:                                                                                             {"judge.UsableCriticalBytes", judge.UsableCriticalBytes},
	`SparkPoolHeadroomLow#1 spark_pool_headroom_bytes <`:                                                                                              noHeadroom,
	`SparkPageCacheHoldingHeadroom#1 spark_pool_headroom_bytes <`:                                                                                     noHeadroom,
	`SparkPageCacheHoldingHeadroom#1 spark_pool_flushable_bytes >=`:                                                                                   {"judge.FlushWorthBytes", judge.FlushWorthBytes},
	`SparkPageCacheHoldingHeadroom#1 spark_workloads{role="training"} >`:                                                                              zero,
	`SparkMemoryEviction#1 instance:spark_pool_pressure_stall_seconds:rate5m{kind="full"} >`:                                                          {"judge.PressureStallShare", judge.PressureStallShare},
	`SparkMemoryEviction#2 instance:spark_pool_refaults:rate5m >`:                                                                                     {"judge.RefaultsPerSecond", judge.RefaultsPerSecond},
	`SparkGPUDriverOutOfMemory#1 increase(spark_kernel_gpu_driver_out_of_memory_total[10m]) >`:                                                        zero,
	`SparkGPUDriverOutOfMemory#1 spark_pool_usable_bytes <`:                                                                                           {"judge.UsableLowBytes", judge.UsableLowBytes},
	`SparkGPUDriverOutOfMemory#2 increase(spark_kernel_gpu_driver_out_of_memory_total[10m]) >`:                                                        zero,
	`SparkGPUDriverOutOfMemory#2 spark_pool_usable_bytes <`:                                                                                           {"judge.UsableLowBytes", judge.UsableLowBytes},
	`instance:spark_pool_free_large_block_bytes:sum#1 spark_pool_block_size_bytes >=`:                                                                 {"judge.LargeBlockBytes", judge.LargeBlockBytes},
	`SparkPoolFragmented#1 instance:spark_pool_free_large_block_bytes:sum <`:                                                                          {"judge.FragmentedBelowBytes", judge.FragmentedBelowBytes},
	`SparkPoolFragmented#1 rate(spark_pool_compaction_failures_total[5m]) >`:                                                                          {"judge.CompactionFailuresPerSecond", judge.CompactionFailuresPerSecond},
	`SparkGPUXidError#1 increase(spark_kernel_gpu_xid_errors_total{xid=~"46|48|62|64|74|79|95|119|120|140|154"}[10m]) >`:                              zero,
	`SparkGPUXidError#1 spark_kernel_field_supported{field="kmsg"} offset 10m ==`:                                                                     one,
	`SparkGPUXidError#2 increase(spark_kernel_gpu_xid_errors_total{xid!~"46|48|62|64|74|79|95|119|120|140|154"}[10m]) >`:                              zero,
	`SparkGPUXidError#2 spark_kernel_field_supported{field="kmsg"} offset 10m ==`:                                                                     one,
	`SparkPCIeFatalError#1 increase(spark_kernel_pcie_aer_errors_total{severity="fatal"}[10m]) >`:                                                     zero,
	`SparkUncleanReboot#1 spark_flight_last_boot_unclean ==`:                                                                                          one,
	`SparkOOMKill#1 increase(spark_pool_oom_kills_total[10m]) >`:                                                                                      zero,
	`SparkPlannedRunWontFit#1 spark_workloads{role="training"} >`:                                                                                     zero,
	`SparkPoolExhaustionImminent#1 delta(spark_pool_usable_bytes[5m]) <`:                                                                              zero,
	`SparkPoolExhaustionImminent#1 spark_pool_usable_bytes + 6 * delta(spark_pool_usable_bytes[5m]) <`:                                                {"judge.ExhaustionFloorBytes", judge.ExhaustionFloorBytes},
	`SparkGPUThrottling#1 max without (state) (spark_thermal_state{state="throttled"}) ==`:                                                            one,
	`SparkGPUThrottling#2 max_over_time(spark_gpu_clocks_event_active{reason=~"sw_thermal_slowdown|hw_thermal_slowdown"}[2m]) ==`:                     one,
	`instance_limit:spark_platform_power_per_limit:ratio#1 spark_platform_power_limit_watts >`:                                                        zero,
	`SparkGPUThrottling#3 sum without (reason) (rate(spark_gpu_clocks_event_seconds_total{reason=~"sw_thermal_slowdown|hw_thermal_slowdown"}[5m])) >`: {"judge.ThermalSlowdownShare", judge.ThermalSlowdownShare},
	`SparkGPUPowerPlateau#1 instance_gpu:spark_gpu_power_watts:avg10m >`:                                                                              {"judge.PlateauLowWatts", judge.PlateauLowWatts},
	`SparkGPUPowerPlateau#1 instance_gpu:spark_gpu_power_watts:avg10m <`:                                                                              {"judge.PlateauHighWatts", judge.PlateauHighWatts},
	`SparkGPUPowerPlateau#1 instance_gpu:spark_gpu_power_watts:spread10m <`:                                                                           {"judge.PlateauSpreadWatts", judge.PlateauSpreadWatts},
	`SparkGPUPowerPlateau#1 instance_gpu:spark_gpu_utilization_ratio:avg10m >=`:                                                                       {"judge.BusyUtilizationRatio", judge.BusyUtilizationRatio},
	`SparkGPUPowerPlateau#2 instance_gpu:spark_gpu_power_watts:avg10m >`:                                                                              {"judge.StuckLowWatts", judge.StuckLowWatts},
	`SparkGPUPowerPlateau#2 instance_gpu:spark_gpu_power_watts:avg10m <`:                                                                              {"judge.PlateauHighWatts", judge.PlateauHighWatts},
	`SparkGPUPowerPlateau#2 instance_gpu:spark_gpu_utilization_ratio:avg10m >=`:                                                                       {"judge.BusyUtilizationRatio", judge.BusyUtilizationRatio},
	`SparkGPUPowerPlateau#2 rate(spark_gpu_clocks_event_seconds_total{reason="sw_power_cap"}[10m]) >=`:                                                {"judge.PowerCapShare", judge.PowerCapShare},
	`SparkGPUPowerStuckLow#1 instance_gpu:spark_gpu_power_watts:avg10m <`:                                                                             {"judge.StuckLowWatts", judge.StuckLowWatts},
	`SparkGPUPowerStuckLow#1 instance_gpu:spark_gpu_utilization_ratio:avg10m >=`:                                                                      {"judge.BusyUtilizationRatio", judge.BusyUtilizationRatio},
	`SparkGPUPowerStuckLow#1 instance_gpu:spark_gpu_sm_clock_per_max:ratio_avg10m <`:                                                                  {"judge.StuckLowClockRatio", judge.StuckLowClockRatio},
	`SparkGPUNvmlDown#1 spark_gpu_nvml_up ==`:                                                                                                         zero,
	`SparkGPUNvmlDown#1 max_over_time(spark_gpu_nvml_up[1w]) ==`:                                                                                      one,
	`SparkGPUDriverHung#1 spark_gpu_nvml_stalled_seconds >`:                                                                                           {"judge.NVMLStalledSeconds", judge.NVMLStalledSeconds},
	`SparkConcurrentHeavyWorkloads#1 spark_workload_memory_cap_ratio <=`:                                                                              {"judge.HeavyCapRatio", judge.HeavyCapRatio},
	`SparkConcurrentHeavyWorkloads#1 spark_workloads{role="training"} >`:                                                                              zero,
	`SparkInferencePreempting#1 sum by (instance, job, pid, kind) (increase(spark_engine_preemptions_total[5m])) >`:                                   zero,
	`SparkInferencePreempting#1 instance:spark_pool_pressure_stall_seconds:rate5m{kind="full"} >`:                                                     {"judge.PressureStallShare", judge.PressureStallShare},
	`SparkInferencePreempting#1 spark_workloads{role="training"} >`:                                                                                   zero,
	`SparkInferencePreempting#1 spark_pool_usable_bytes <`:                                                                                            {"judge.UsableLowBytes", judge.UsableLowBytes},
	`SparkInferenceStalled#1 sum by (instance, job, pid, kind) (min_over_time(spark_engine_requests{state="running"}[5m])) >`:                         zero,
	`SparkInferenceStalled#1 sum by (instance, job, pid, kind) (increase(spark_engine_tokens_total{tokens="generation"}[5m])) ==`:                     zero,
	`SparkInferenceStalled#1 max by (instance, job) (max_over_time(spark_gpu_power_watts[5m])) <`:                                                     {"judge.StalledEngineWatts", judge.StalledEngineWatts},
	`instance:spark_gpu_energy_joules_per_generated_token:ratio_rate5m#1 instance:spark_engine_generated_tokens:rate5m >`:                             zero,
	`SparkSoCProchot#1 spark_platform_prochot ==`:                                                                                                     one,
	`SparkSystemPowerLimited#1 instance_limit:spark_platform_power_per_limit:ratio{limit=~"pl1|syspl1"} >=`:                                           {"judge.PowerLimitShare", judge.PowerLimitShare},
	`SparkSystemPowerLimited#1 max by (instance, job) (instance_gpu:spark_gpu_utilization_ratio:avg10m) >=`:                                           {"judge.BusyUtilizationRatio", judge.BusyUtilizationRatio},
	`SparkFabricLinkDown#1 spark_fabric_link_up ==`:                                                                                                   zero,
	`SparkFabricLinkDown#1 max_over_time(spark_fabric_link_up[1d]) ==`:                                                                                one,
	`SparkFabricRailImbalance#1 max without (port) (spark_fabric_link_up) ==`:                                                                         one,
	`SparkFabricRailImbalance#1 max without (device) (label_replace(instance_device:spark_fabric_bytes:rate5m{device=~"roce(P[0-9]+)?p[0-9]+s[0-9]+f[0-9]+"} and ignoring (direction) max without (port) (spark_fabric_link_up) == 1, "pair", "$1", "device", "roce(?:P[0-9]+)?(p[0-9]+s[0-9]+f[0-9]+)")) >`:    {"judge.FabricTransferBytesPerSecond", judge.FabricTransferBytesPerSecond},
	`SparkFabricRailImbalance#1 count without (device) (label_replace(instance_device:spark_fabric_bytes:rate5m{device=~"roce(P[0-9]+)?p[0-9]+s[0-9]+f[0-9]+"} and ignoring (direction) max without (port) (spark_fabric_link_up) == 1, "pair", "$1", "device", "roce(?:P[0-9]+)?(p[0-9]+s[0-9]+f[0-9]+)")) ==`: {"judge.FabricFunctionsPerPort", judge.FabricFunctionsPerPort},
	`SparkFabricErrors#1 sum without (counter) (increase(spark_fabric_port_errors_total{counter!="link_downed"}[10m])) >`:                                                                                              zero,
	`SparkFabricErrors#1 sum without (counter) (increase(spark_fabric_roce_events_total{counter=~"out_of_sequence|packet_seq_err|local_ack_timeout_err|implied_nak_seq_err|out_of_buffer|rnr_nak_retry_err"}[10m])) >`: zero,
	`SparkExporterCollectorFailing#1 avg_over_time(spark_scrape_collector_success[15m]) <`:                                                                                                                             {"judge.CollectorFailingShare", judge.CollectorFailingShare},
	`SparkUserspaceOOMKill#1 increase(spark_journal_oom_kills_total[10m]) >`:                                                                                                                                           zero,
}

// thresholdKey names one comparison of the nth rule called name.
func thresholdKey(name string, n int, th promqltest.Threshold) string {
	return fmt.Sprintf("%s#%d %s %s", name, n, th.Expr, th.Op)
}

// thresholdErrors checks the comparisons found in each rule against the
// table: a number that differs from its constant, a comparison the table
// does not know, and a table entry no rule has any more.
func thresholdErrors(found map[string]float64, want map[string]constant) []string {
	var errs []string
	for key, v := range found {
		c, ok := want[key]
		switch {
		case !ok:
			errs = append(errs, fmt.Sprintf("%s %g: a threshold internal/judge does not define; add the constant and tie it here", key, v))
		case v != c.value:
			errs = append(errs, fmt.Sprintf("%s %g, but %s is %g", key, v, c.name, c.value))
		}
	}
	for key := range want {
		if _, ok := found[key]; !ok {
			errs = append(errs, fmt.Sprintf("%s: no such comparison in %s any more", key, rulesFile))
		}
	}
	return errs
}

// Every number the rules compare with is internal/judge's, so the alerts,
// the status page, `plan` and `report` judge alike.
func TestRuleThresholdsAreJudges(t *testing.T) {
	rules := loadRules(t)
	exprs := make([]string, len(rules))
	for i, r := range rules {
		exprs[i] = r.Expr
	}
	results := promqltest.Parse(t, exprs)
	found := map[string]float64{}
	seen := map[string]int{}
	for i, r := range rules {
		if results[i].Error != "" {
			t.Fatalf("%s: %s", r.name(), results[i].Error)
		}
		seen[r.name()]++
		for _, th := range results[i].Thresholds {
			found[thresholdKey(r.name(), seen[r.name()], th)] = th.Value
		}
	}
	if len(found) == 0 {
		t.Fatal("no threshold found in the rules: the parser helper reports none")
	}
	for _, e := range thresholdErrors(found, thresholds) {
		t.Error(e)
	}
}

// A rule whose number drifts from the constant fails, naming both.
func TestThresholdErrorsNameBoth(t *testing.T) {
	want := map[string]constant{"A#1 x >": {"judge.X", 80}, "A#1 y <": {"judge.Y", 1}}
	got := strings.Join(thresholdErrors(map[string]float64{"A#1 x >": 85, "B#1 z ==": 3}, want), "\n")
	for _, part := range []string{"A#1 x > 85, but judge.X is 80", "B#1 z == 3: a threshold internal/judge does not define", "A#1 y <: no such comparison"} {
		if !strings.Contains(got, part) {
			t.Errorf("errors %q lack %q", got, part)
		}
	}
}

// xidMatcher is the xid label matcher of a SparkGPUXidError rule.
var xidMatcher = regexp.MustCompile(`spark_kernel_gpu_xid_errors_total\{xid(=~|!~)"([0-9|]+)"\}`)

// Both SparkGPUXidError rules split the codes where judge.XidPages does,
// which the kernel reader's code cap also keeps: a code that pages is
// critical in the rules and never crowded out of the counts.
func TestXidPagingCodesAreJudges(t *testing.T) {
	want := map[string]bool{}
	for code := 1; code <= 999; code++ {
		if judge.XidPages(code) {
			want[strconv.Itoa(code)] = true
		}
	}
	n := 0
	for _, r := range loadRules(t) {
		if r.Alert != "SparkGPUXidError" {
			continue
		}
		for _, m := range xidMatcher.FindAllStringSubmatch(r.Expr, -1) {
			n++
			got := map[string]bool{}
			for _, code := range strings.Split(m[2], "|") {
				got[code] = true
			}
			if !maps.Equal(got, want) {
				t.Errorf("SparkGPUXidError xid%s%q, but judge.XidPages is true for %v", m[1], m[2], slices.Sorted(maps.Keys(want)))
			}
		}
	}
	if n == 0 {
		t.Error("no xid matcher found in SparkGPUXidError's rules")
	}
}
