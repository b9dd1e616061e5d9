package main

//lint:file-ignore SA1019 the classic dashboard model (dashboard, not dashboardv2), which Grafana 12 imports and provisions by default; schema v2 still needs a feature flag there (docs/dashboards.md)

import (
	"fmt"
	"math"

	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"

	"github.com/spark-exporter/spark_exporter/internal/judge"
)

// Colours of this dashboard alone; the judgements' own thresholds come from
// internal/judge.
const (
	// roomyHeadroomBytes: headroom from which another mid-size run still
	// fits; orange between the reserve and this.
	roomyHeadroomBytes = 8 << 30
	// hotCelsius and tooHotCelsius colour GPU and SoC temperatures: loaded
	// GB10s have been reported at 91–98 °C.
	hotCelsius    = 85
	tooHotCelsius = 95
	// someThrottlingShare and muchThrottlingShare colour the share of the
	// range spent in the throttled state.
	someThrottlingShare = 0.01
	muchThrottlingShare = 0.1
	// fabricRateBits is a DGX Spark ConnectX-7 port's rate, 200 Gb/s
	// (NVIDIA's DGX Spark specification).
	fabricRateBits = 200e9
)

// spark is the dashboard of one or several Sparks, picked by the instance
// variable: the pool, the GPU, thermals, the workloads, the exporter.
func spark() *dashboard.DashboardBuilder {
	b := dashboard.NewDashboardBuilder("DGX Spark").
		Uid("spark-exporter").
		Description("NVIDIA DGX Spark (GB10): the unified memory pool, GPU power and thermals, throttling, eviction and the programs sharing the pool, from spark_exporter.").
		Tags([]string{"spark", "gb10", "nvidia"}).
		Editable().
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		Refresh("30s").
		Time("now-6h", "now").
		Timezone(common.TimeZoneBrowser).
		Version(1).
		WithVariable(datasourceVariable()).
		WithVariable(instanceVariable()).
		Annotation(builtInAnnotations()).
		Annotation(alertAnnotations())
	b.WithRow(row(1, "Now"))
	b.WithPanel(statPanel(2, "Usable memory",
		fmt.Sprintf("MemAvailable − CmaFree: what the GPU driver's pinned allocations can still get from the unified pool, reclaim included. This is the danger figure: it falls into a global OOM kill while free memory rises (an owner's Spark read 26–30 GiB healthy, 1.6 GiB at the kill). Orange under %.0f GiB (SparkPoolUsableLow): cap or restart what grows; red under %.0f GiB (SparkPoolUsableCritical): a kill is minutes away, restart the growing engine now.", float64(judge.UsableLowBytes)/(1<<30), float64(judge.UsableCriticalBytes)/(1<<30)),
		"bytes", 4, 4).
		Thresholds(thresholds("red", step(judge.UsableCriticalBytes, "orange"), step(judge.UsableLowBytes, "green"))).
		WithTarget(rangeQuery("A", `spark_pool_usable_bytes{instance=~"$instance"}`, "{{instance}}")))
	b.WithPanel(statPanel(3, "New job: headroom after a flush",
		"free − free CMA + flushable page cache − reserve: what a new run can take once `sync; echo 3 > /proc/sys/vm/drop_caches` has run (step 1 of the OOM ladder, before touching packing length or batch size). Planning, not danger: on a healthy Spark serving a model the page cache fills the pool and the headroom before a flush is below 0. Red below 0: a new run does not fit even after a flush.",
		"bytes", 4, 4).
		Thresholds(thresholds("red", step(0, "orange"), step(roomyHeadroomBytes, "green"))).
		WithTarget(rangeQuery("A", `spark_pool_headroom_after_flush_bytes{instance=~"$instance"}`, "{{instance}}")))
	b.WithPanel(statPanel(4, "GPU temperature",
		"Core temperature from NVML. Loaded GB10s have been reported at 91–98 °C. Hot and climbing while power sits flat: see Thermal state; check airflow (nothing blocking the vents, room temperature) before the workload.",
		"celsius", 4, 4).
		Thresholds(thresholds("green", step(hotCelsius, "orange"), step(tooHotCelsius, "red"))).
		WithTarget(rangeQuery("A", `spark_gpu_temperature_celsius{instance=~"$instance"}`, "{{instance}} gpu{{gpu}}")))
	b.WithPanel(statPanel(5, "GPU power",
		fmt.Sprintf("Power draw from NVML. Around %.0f W under sustained load is the GB10 platform cap, not a fault: do not retune for it. Under %.0f W on a busy GPU is the stuck-low power-delivery fault: power-cycle the Spark at the wall (runbook SparkGPUPowerStuckLow). Red at the %.0f W brick rating.", judge.PlateauWatts, judge.StuckLowWatts, judge.RatingWatts),
		"watt", 4, 4).
		Thresholds(thresholds("green", step(judge.RatingWatts, "red"))).
		WithTarget(rangeQuery("A", `spark_gpu_power_watts{instance=~"$instance"}`, "{{instance}} gpu{{gpu}}")))
	b.WithPanel(statPanel(6, "Thermal state",
		"The exporter's verdict over its window: collecting (window not yet full), normal, watching (temperature rising with power still near peak: keep watching), throttled (temperature climbing or holding hot while power sits flat below the 240 W rating): check airflow and the room, then the Thermal row.",
		"none", 4, 4).
		Mappings(mappings(valueMap(
			"0", "collecting", "blue",
			"1", "normal", "green",
			"2", "watching", "yellow",
			"3", "throttled", "red",
		))).
		WithTarget(rangeQuery("A", `max by (instance, gpu) (
    (spark_thermal_state{instance=~"$instance", state="collecting"} == 1) * 0
  or (spark_thermal_state{instance=~"$instance", state="normal"} == 1) * 1
  or (spark_thermal_state{instance=~"$instance", state="watching"} == 1) * 2
  or (spark_thermal_state{instance=~"$instance", state="throttled"} == 1) * 3
)`, "{{instance}} gpu{{gpu}}")))
	b.WithPanel(statPanel(7, "Firing Spark alerts",
		"Spark alerts firing now, from Prometheus' ALERTS series. Above 0: the table in Alerts and exporter health names them; each alert's runbook (docs/runbooks.md) says what to do.",
		"none", 4, 4).
		Decimals(0).
		NoValue("none firing").
		Thresholds(thresholds("green", step(1, "red"))).
		WithTarget(instantQuery("A", `count by (instance) (ALERTS{alertname=~"Spark.*", alertstate="firing", instance=~"$instance"})`, "{{instance}}")))
	b.WithRow(row(8, "Unified memory pool"))
	b.WithPanel(timeseriesPanel(9, "Usable memory against its tiers; headroom for a new job",
		fmt.Sprintf("Usable = MemAvailable − CmaFree, the danger figure: under the orange line (%.0f GiB, SparkPoolUsableLow) the engine's peak nears the pool, under the red one (%.0f GiB, SparkPoolUsableCritical) a global OOM kill is minutes away; a steady fall is an engine's creep (SparkPoolExhaustionImminent): the alert names the process that grew. The dashed line (headroom = MemFree − CmaFree − reserve) and the dotted one (after a flush) are for planning a new job; below 0 a new job needs a flush first, which is normal with a full page cache.", float64(judge.UsableLowBytes)/(1<<30), float64(judge.UsableCriticalBytes)/(1<<30)),
		"bytes", 9, 9).
		ThresholdsStyle(thresholdsAs(common.GraphThresholdsStyleModeLine)).
		Thresholds(thresholds("transparent", step(judge.UsableCriticalBytes, "red"), step(judge.UsableLowBytes, "orange"))).
		OverrideByQuery("B", props(
			lineStyle(dashed))).
		OverrideByQuery("C", props(
			lineStyle(dotted),
			noFill())).
		WithTarget(rangeQuery("A", `spark_pool_usable_bytes{instance=~"$instance"}`, "{{instance}} usable")).
		WithTarget(rangeQuery("B", `spark_pool_headroom_bytes{instance=~"$instance"}`, "{{instance}} headroom for a new job")).
		WithTarget(rangeQuery("C", `spark_pool_headroom_after_flush_bytes{instance=~"$instance"}`, "{{instance}} headroom after flush")))
	b.WithPanel(timeseriesPanel(10, "Where the pool is: free / available / page cache / flushable / mapped",
		"free (MemFree) is the figure to size a new job against; it sits near 1 GiB on a healthy Spark whose page cache fills the pool, and rises into a kill as reclaim empties the cache. available counts reclaimable cache and free CMA; free CMA pages count as free yet the GPU driver's pinned allocations cannot use them (usable = available − free CMA). page cache is free's buff/cache, flushable is what drop_caches gives back, mapped is mmap'd files (safetensors during a model load: the load transient). free low while flushable is large: flush the page cache before a new run (OOM ladder step 1).",
		"bytes", 9, 9).
		AxisSoftMin(0).
		FillOpacity(0).
		OverrideByQuery("F", props(
			lineStyle(dashed))).
		WithTarget(rangeQuery("A", `spark_pool_free_bytes{instance=~"$instance"}`, "{{instance}} free")).
		WithTarget(rangeQuery("B", `spark_pool_available_bytes{instance=~"$instance"}`, "{{instance}} available")).
		WithTarget(rangeQuery("C", `spark_pool_page_cache_bytes{instance=~"$instance"}`, "{{instance}} page cache")).
		WithTarget(rangeQuery("D", `spark_pool_flushable_bytes{instance=~"$instance"}`, "{{instance}} flushable")).
		WithTarget(rangeQuery("E", `spark_pool_mapped_bytes{instance=~"$instance"}`, "{{instance}} mapped")).
		WithTarget(rangeQuery("F", `spark_pool_total_bytes{instance=~"$instance"}`, "{{instance}} total")).
		WithTarget(rangeQuery("G", `spark_pool_cma_free_bytes{instance=~"$instance"}`, "{{instance}} free CMA")))
	b.WithPanel(statPanel(11, "nvidia-smi memory view",
		`What NVML reports as GPU memory. On GB10 there is no separate VRAM and NVML answers Not Supported: the exporter then exports spark_gpu_field_supported{field="memory_info"} 0 and no memory figures. Use the pool headroom instead.`,
		"bytes", 6, 9).
		NoValue("no NVML reading (driver or library missing)").
		OverrideByQuery("C", props(
			dynamic("unit", "none"),
			fixedColor("text"),
			dynamic("mappings", mappings(valueMap(
				"0", "N/A (GB10: unified memory — see pool headroom)", "text",
			))))).
		WithTarget(rangeQuery("A", `spark_gpu_memory_used_bytes{instance=~"$instance"}`, "{{instance}} gpu{{gpu}} used")).
		WithTarget(rangeQuery("B", `spark_gpu_memory_total_bytes{instance=~"$instance"}`, "{{instance}} gpu{{gpu}} total")).
		WithTarget(rangeQuery("C", `spark_gpu_field_supported{field="memory_info", instance=~"$instance"} == 0`, "{{instance}} gpu{{gpu}}")))
	b.WithRow(row(12, "Memory pressure and eviction"))
	b.WithPanel(timeseriesPanel(13, "Memory stall (PSI)",
		"Share of wall time tasks waited on memory (/proc/pressure/memory). some: at least one task stalled; full: all non-idle tasks stalled at once. Sustained full stall is silent eviction (SparkMemoryEviction): two jobs are pushing each other out; stop or cap one (see Workloads on the pool).",
		"percentunit", 6, 8).
		AxisSoftMin(0).
		WithTarget(rangeQuery("A", `rate(spark_pool_pressure_stall_seconds_total{instance=~"$instance"}[$__rate_interval])`, "{{instance}} {{kind}}")))
	b.WithPanel(timeseriesPanel(14, "Refaults and major faults",
		"Refaults: evicted pages read back (workingset_refault_*): another program on the pool is pushing this one's pages out. Major faults: pages read from disk (pgmajfault). A sustained storm is eviction: find the second job in Workloads on the pool and stop or cap it.",
		"suffix: pages/s", 6, 8).
		AxisSoftMin(0).
		OverrideByQuery("B", props(
			dynamic("unit", "suffix: faults/s"))).
		WithTarget(rangeQuery("A", `rate(spark_pool_refaults_total{instance=~"$instance"}[$__rate_interval])`, "{{instance}} refaults {{type}}")).
		WithTarget(rangeQuery("B", `rate(spark_pool_major_faults_total{instance=~"$instance"}[$__rate_interval])`, "{{instance}} major faults")))
	b.WithPanel(timeseriesPanel(15, "Reclaim and allocation stalls",
		"Pages reclaimed by kswapd (background) and directly by allocating tasks (pgsteal_*), and allocation stalls (allocstall_*): direct reclaim means programs wait for memory. Stalls that persist under a run: the pool is overcommitted; lower the batch or the cache cap.",
		"suffix: pages/s", 6, 8).
		AxisSoftMin(0).
		OverrideByQuery("B", props(
			dynamic("unit", "suffix: stalls/s"))).
		WithTarget(rangeQuery("A", `rate(spark_pool_reclaimed_pages_total{instance=~"$instance"}[$__rate_interval])`, "{{instance}} reclaimed by {{by}}")).
		WithTarget(rangeQuery("B", `rate(spark_pool_allocation_stalls_total{instance=~"$instance"}[$__rate_interval])`, "{{instance}} allocation stalls")))
	b.WithPanel(statPanel(16, "OOM kills in range",
		"Processes the kernel OOM-killed in the selected time range (vmstat oom_kill). Above 0: `journalctl -k | grep -i oom` names the victim; fit the next run to the headroom after a flush (spark_exporter plan) before restarting it.",
		"none", 6, 8).
		Decimals(0).
		Thresholds(thresholds("green", step(1, "red"))).
		WithTarget(instantQuery("A", `round(increase(spark_pool_oom_kills_total{instance=~"$instance"}[$__range]))`, "{{instance}}")))
	b.WithRow(row(17, "GPU"))
	b.WithPanel(timeseriesPanel(18, "GPU power",
		fmt.Sprintf("Power draw. Dashed lines: the ~%.0f W sustained plateau (GB10's platform cap: not a bug, do not retune) and the %.0f W brick rating. A busy GPU held under %.0f W is the stuck-low power fault: power-cycle at the wall.", judge.PlateauWatts, judge.RatingWatts, judge.StuckLowWatts),
		"watt", 8, 9).
		AxisSoftMax(judge.RatingWatts+10).
		AxisSoftMin(0).
		ThresholdsStyle(thresholdsAs(common.GraphThresholdsStyleModeDashed)).
		Thresholds(thresholds("transparent", step(judge.PlateauWatts, "orange"), step(judge.RatingWatts, "red"))).
		OverrideByQuery("B", props(
			lineStyle(dashed),
			noFill())).
		WithTarget(rangeQuery("A", `spark_gpu_power_watts{instance=~"$instance"}`, "{{instance}} gpu{{gpu}} power")).
		WithTarget(rangeQuery("B", `spark_thermal_window_power_mean_watts{instance=~"$instance"}`, "{{instance}} gpu{{gpu}} window mean")).
		WithTarget(rangeQuery("C", `spark_gpu_power_limit_watts{instance=~"$instance"}`, "{{instance}} gpu{{gpu}} enforced limit")))
	b.WithPanel(timeseriesPanel(19, "GPU temperature",
		"Core temperature. Throttling shows as temperature climbing or holding hot while power stays flat below the 240 W rating; watch 10–15 minutes before concluding, then check airflow and the room.",
		"celsius", 8, 9).
		AxisSoftMin(0).
		ThresholdsStyle(thresholdsAs(common.GraphThresholdsStyleModeDashed)).
		Thresholds(thresholds("transparent", step(hotCelsius, "orange"), step(tooHotCelsius, "red"))).
		WithTarget(rangeQuery("A", `spark_gpu_temperature_celsius{instance=~"$instance"}`, "{{instance}} gpu{{gpu}}")))
	b.WithPanel(timeseriesPanel(20, "SM clock against its max",
		fmt.Sprintf("Current SM clock and its maximum (dashed). A busy GPU under %.0f%% of its max (500–850 MHz instead of ~2.4–3 GHz) with power under %.0f W is the stuck-low power fault: power-cycle the Spark at the wall.", 100*judge.StuckLowClockRatio, judge.StuckLowWatts),
		"hertz", 8, 9).
		AxisSoftMin(0).
		OverrideByQuery("B", props(
			lineStyle(dashed),
			noFill())).
		WithTarget(rangeQuery("A", `spark_gpu_sm_clock_hertz{instance=~"$instance"}`, "{{instance}} gpu{{gpu}} SM clock")).
		WithTarget(rangeQuery("B", `spark_gpu_sm_clock_max_hertz{instance=~"$instance"}`, "{{instance}} gpu{{gpu}} max")))
	b.WithPanel(stateTimelinePanel(21, "Clock event reasons",
		"Why NVML says the clocks are held down (clock event reasons). gpu_idle is normal at rest; sw/hw thermal slowdown and sw_power_cap under load explain a slow run. On a GB10 these flags often stay clear: read Seconds per minute in each clock event below.",
		"none", 16, 9).
		ShowValue(common.VisibilityModeNever).
		Mappings(mappings(valueMap(
			"0", "inactive", "transparent",
			"1", "active", "orange",
		))).
		WithTarget(rangeQuery("A", `spark_gpu_clocks_event_active{instance=~"$instance"}`, "{{instance}} gpu{{gpu}} {{reason}}")))
	b.WithPanel(timeseriesPanel(22, "GPU utilisation",
		fmt.Sprintf("Share of time a kernel was running on the GPU (NVML). The dashed line is where the alert rules count the GPU as busy (%.0f%%): a busy GPU far below the power plateau is stuck or memory-bound, see GPU power.", 100*judge.BusyUtilizationRatio),
		"percentunit", 8, 9).
		AxisSoftMin(0).
		ThresholdsStyle(thresholdsAs(common.GraphThresholdsStyleModeDashed)).
		Thresholds(thresholds("transparent", step(judge.BusyUtilizationRatio, "orange"))).
		Min(0).
		Max(1).
		WithTarget(rangeQuery("A", `spark_gpu_utilization_ratio{instance=~"$instance"}`, "{{instance}} gpu{{gpu}}")))
	b.WithRow(row(23, "Thermal"))
	b.WithPanel(stateTimelinePanel(24, "Thermal state",
		"The exporter's thermal verdict over time, and the throttle signature (GPU busy, power flat below nominal, temperature climbing or holding hot). Throttled for minutes at a time: improve airflow or lower the room temperature; the run is slower, not broken.",
		"none", 16, 7).
		Mappings(mappings(valueMap(
			"0", "collecting", "blue",
			"1", "normal", "green",
			"2", "watching", "yellow",
			"3", "throttled", "red",
		))).
		OverrideByQuery("B", props(
			dynamic("mappings", mappings(valueMap(
				"0", "no", "transparent",
				"1", "signature", "red",
			))))).
		WithTarget(rangeQuery("A", `max by (instance, gpu) (
    (spark_thermal_state{instance=~"$instance", state="collecting"} == 1) * 0
  or (spark_thermal_state{instance=~"$instance", state="normal"} == 1) * 1
  or (spark_thermal_state{instance=~"$instance", state="watching"} == 1) * 2
  or (spark_thermal_state{instance=~"$instance", state="throttled"} == 1) * 3
)`, "{{instance}} gpu{{gpu}} state")).
		WithTarget(rangeQuery("B", `spark_thermal_throttle_signature{instance=~"$instance"}`, "{{instance}} gpu{{gpu}} throttle signature")))
	b.WithPanel(statPanel(25, "Throttle episodes in range",
		"Entries into the throttled state in the selected time range. Several in a run: the cooling does not keep up; check airflow (`spark_exporter report` lists the episodes).",
		"none", 4, 7).
		Decimals(0).
		Thresholds(thresholds("green", step(1, "red"))).
		WithTarget(instantQuery("A", `round(increase(spark_thermal_throttle_episodes_total{instance=~"$instance"}[$__range]))`, "{{instance}} gpu{{gpu}}")))
	b.WithPanel(gaugePanel(26, "Share of time throttled",
		"Time spent throttled divided by the selected time range. Orange from 1%, red from 10%: at that share the run's speed is set by cooling; check airflow and the room.",
		"percentunit", 4, 7).
		Min(0).
		Max(1).
		Thresholds(thresholds("green", step(someThrottlingShare, "orange"), step(muchThrottlingShare, "red"))).
		WithTarget(instantQuery("A", `increase(spark_thermal_throttled_seconds_total{instance=~"$instance"}[$__range]) / $__range_s`, "{{instance}} gpu{{gpu}}")))
	b.WithPanel(timeseriesPanel(27, "Thermal window: power spread and temperature slope",
		"The inputs of the throttle signature over the analysis window (--thermal.window): power max − min (flat when small) and the least-squares temperature slope. Read them when Thermal state surprises you: a small spread with a rising slope is throttling.",
		"watt", 24, 7).
		OverrideByQuery("B", props(
			dynamic("unit", "suffix: °C/s"),
			dynamic("custom.axisPlacement", "right"))).
		WithTarget(rangeQuery("A", `spark_thermal_window_power_spread_watts{instance=~"$instance"}`, "{{instance}} gpu{{gpu}} power spread")).
		WithTarget(rangeQuery("B", `spark_thermal_window_temperature_slope_celsius_per_second{instance=~"$instance"}`, "{{instance}} gpu{{gpu}} temperature slope")))
	b.WithRow(row(38, "Platform: SoC temperatures and system power"))
	b.WithPanel(timeseriesPanel(39, "SoC temperatures beside the GPU's",
		"The Spark's ACPI thermal zones by their ACPI names (TSOC, TGPU, ...; zone is the index node_exporter's node_thermal_zone_temp uses) and the spbm driver's SoC sensors, beside NVML's GPU temperature. A hot SoC zone with a cool GPU is heat from the CPU side of the one die.",
		"celsius", 12, 8).
		AxisSoftMin(0).
		ThresholdsStyle(thresholdsAs(common.GraphThresholdsStyleModeDashed)).
		Thresholds(thresholds("transparent", step(hotCelsius, "orange"), step(tooHotCelsius, "red"))).
		WithTarget(rangeQuery("A", `spark_platform_temperature_celsius{instance=~"$instance"}`, "{{instance}} {{source}} {{sensor}}")).
		WithTarget(rangeQuery("B", `spark_gpu_temperature_celsius{instance=~"$instance"}`, "{{instance}} gpu{{gpu}} (NVML)")))
	b.WithPanel(timeseriesPanel(40, "System power against its firmware limits",
		`System power rails from the spbm driver (sys_total is the whole machine, about 25 W idle), the power each firmware limiter sees (pl1, pl2, syspl1, syspl2) and their caps. A limiter flat at its cap while a run is slow is SparkSystemPowerLimited: the firmware, not the GPU, holds the run. Empty without the spbm driver (spark_platform_field_supported{field="spbm"} 0).`,
		"watt", 12, 8).
		AxisSoftMin(0).
		Thresholds(thresholds("transparent")).
		WithTarget(rangeQuery("A", `spark_platform_power_watts{instance=~"$instance", rail=~"sys_total|dc_input|soc_pkg|gpu|cpu_p|cpu_e"}`, "{{instance}} {{rail}}")).
		WithTarget(rangeQuery("B", `spark_platform_power_watts{instance=~"$instance", rail=~"pl1|pl2|syspl1|syspl2"}`, "{{instance}} {{rail}} (limiter sees)")).
		WithTarget(rangeQuery("C", `spark_platform_power_limit_watts{instance=~"$instance"}`, "{{instance}} {{limit}} cap")))
	b.WithPanel(statPanel(41, "Machine and BIOS",
		"The DMI identity: vendor, product, board and BIOS version. Several GB10 power and telemetry problems are reported changed by BIOS updates: compare versions when two Sparks behave differently.",
		"none", 8, 5).
		TextMode(common.BigValueTextModeName).
		Decimals(0).
		Thresholds(thresholds("blue")).
		WithTarget(rangeQuery("A", `spark_platform_info{instance=~"$instance"}`, "{{instance}} {{product_name}} ({{board_name}}) BIOS {{bios_version}}")))
	b.WithPanel(statPanel(42, "PROCHOT and power-limit level",
		"PROCHOT 1: the SoC is in a thermal emergency and the firmware throttles CPU and GPU together (SparkSoCProchot). The power-limit level is the firmware's pl_level; a change as a run changes speed ties the slow state to the firmware.",
		"none", 8, 5).
		Decimals(0).
		Thresholds(thresholds("green", step(1, "red"))).
		WithTarget(rangeQuery("A", `spark_platform_prochot{instance=~"$instance"}`, "{{instance}} PROCHOT")).
		WithTarget(rangeQuery("B", `spark_platform_power_limit_level{instance=~"$instance"}`, "{{instance}} limit level")))
	b.WithPanel(statPanel(43, "Platform sources",
		"1 where the host gives the source: spbm (the community spark_hwmon driver: rails, limits, PROCHOT), thermal_zones, dmi. Unreadable files counts sysfs files the exporter could not read (permissions, ACPI zones that refuse reads).",
		"none", 8, 5).
		Decimals(0).
		Thresholds(thresholds("green", step(1, "orange"))).
		WithTarget(rangeQuery("A", `spark_platform_field_supported{instance=~"$instance"}`, "{{instance}} {{field}}")).
		WithTarget(rangeQuery("B", `spark_platform_unreadable_files{instance=~"$instance"}`, "{{instance}} unreadable files")))
	b.WithRow(row(28, "Workloads on the pool"))
	b.WithPanel(tablePanel(29, "GPU-resident programs",
		fmt.Sprintf("Programs found in /proc: kind, role, the memory cap they were started with (vLLM --gpu-memory-utilization, SGLang --mem-fraction-static) and resident memory. One heavy uncapped job at a time: a trainer beside an inference server capped above %g risks silent eviction (orange; SparkConcurrentHeavyWorkloads): restart the server with a lower cap.", judge.HeavyCapRatio),
		"none", 14, 8).
		SortBy(sortBy("resident memory", true)).
		OverrideByName("Value #A", props(
			dynamic("displayName", "resident memory"),
			dynamic("unit", "bytes"))).
		OverrideByName("Value #B", props(
			dynamic("displayName", "memory cap"),
			dynamic("unit", "percentunit"),
			dynamic("noValue", "uncapped"),
			thresholdsOverride(thresholds("green", step(math.Nextafter(judge.HeavyCapRatio, 1), "orange"))),
			dynamic("custom.cellOptions", map[string]any{"type": "color-text"}))).
		WithTransformation(merge()).
		WithTransformation(organize([]string{"Time"}, []string{"instance", "pid", "kind", "role", "container", "Value #B", "Value #A"})).
		WithTarget(tableQuery("A", `max by (instance, pid, kind, role, container) (spark_workload_resident_bytes{instance=~"$instance"} * on (instance, pid) group_left (container) spark_workload_info{instance=~"$instance"})`)).
		WithTarget(tableQuery("B", `max by (instance, pid, kind, role, container) (spark_workload_memory_cap_ratio{instance=~"$instance"} * on (instance, pid) group_left (role, container) spark_workload_info{instance=~"$instance"})`)))
	b.WithPanel(statPanel(30, "Workloads by role",
		"GPU-resident programs per role. Both roles are always reported. A trainer beside an inference server is the pairing that evicts silently: check the inference server's memory cap in GPU-resident programs.",
		"none", 4, 8).
		Decimals(0).
		WithTarget(rangeQuery("A", `spark_workloads{instance=~"$instance"}`, "{{instance}} {{role}}")))
	b.WithPanel(statPanel(31, "Unreadable processes",
		"Processes whose /proc entry could not be read (hidepid, permissions). Above 0 the workload detection may be blind: run the exporter with access to every process (--pid=host in a container).",
		"none", 6, 8).
		Decimals(0).
		Thresholds(thresholds("green", step(1, "orange"))).
		WithTarget(rangeQuery("A", `spark_workload_unreadable_processes{instance=~"$instance"}`, "{{instance}}")))
	b.WithPanel(timeseriesPanel(32, "GPU memory per process",
		"CUDA memory per process as NVML reports it (this works on GB10 even though the device-wide memory view does not). It is part of the same 128 GB pool as everything else. A line that only grows is a leak or an unbounded cache: cap or restart that program before headroom runs out.",
		"bytes", 14, 8).
		AxisSoftMin(0).
		WithTarget(rangeQuery("A", `spark_gpu_process_memory_bytes{instance=~"$instance"}`, "{{instance}} {{comm}} ({{pid}})")))
	b.WithPanel(barGaugePanel(33, "Planned runs against the headroom after a flush",
		"Peak pool need of each planned run in --plan.file (load transient included), beside what a flush would leave. Empty when the exporter runs without --plan.file. A bar longer than the headroom will not fit (SparkPlannedRunWontFit): flush, stop another job or shrink the run.",
		"bytes", 10, 8).
		Min(0).
		NoValue("no planned runs (--plan.file not given)").
		OverrideByQuery("B", props(
			fixedColor("green"))).
		WithTarget(instantQuery("A", `spark_plan_required_bytes{instance=~"$instance"}`, "{{instance}} {{plan}}")).
		WithTarget(instantQuery("B", `spark_pool_headroom_after_flush_bytes{instance=~"$instance"}`, "{{instance}} headroom after flush")))
	b.WithRow(row(34, "Alerts and exporter health"))
	b.WithPanel(tablePanel(35, "Firing Spark alerts",
		"Spark alerts firing now (ALERTS series). Each alert's runbook (docs/runbooks.md, or the URL your rules point at) says how to confirm it and what to do.",
		"none", 12, 8).
		SortBy(sortBy("severity", false)).
		NoValue("no Spark alert firing").
		WithTransformation(organize([]string{"Time", "Value", "__name__", "alertstate"}, []string{"alertname", "severity", "instance"})).
		WithTarget(tableQuery("A", `ALERTS{alertname=~"Spark.*", alertstate="firing", instance=~"$instance"}`)))
	b.WithPanel(stateTimelinePanel(36, "Collectors",
		"spark_scrape_collector_success per collector: a failing collector stops its own figures only. A collector failing for minutes: the exporter's log names the file or call (SparkExporterCollectorFailing).",
		"none", 8, 8).
		ShowValue(common.VisibilityModeNever).
		Mappings(mappings(valueMap(
			"0", "failing", "red",
			"1", "ok", "green",
		))).
		WithTarget(rangeQuery("A", `spark_scrape_collector_success{instance=~"$instance"}`, "{{instance}} {{collector}}")))
	b.WithPanel(statPanel(37, "NVML",
		"Whether NVML loaded (driver and libnvidia-ml present). 0 is never a scrape failure, but the GPU panels stay empty: check `nvidia-smi` on the host and --gpu.nvml-library (SparkGPUNvmlDown).",
		"none", 4, 8).
		Mappings(mappings(valueMap(
			"0", "down", "red",
			"1", "up", "green",
		))).
		WithTarget(rangeQuery("A", `spark_gpu_nvml_up{instance=~"$instance"}`, "{{instance}}")))
	b.WithRow(row(44, "Clock events, thermal margin and P-state (what the driver did)"))
	b.WithPanel(timeseriesPanel(45, "Seconds per minute in each clock event",
		"How many seconds in each minute the driver held the clocks down, per reason, from NVML's clock event counters (spark_gpu_clocks_event_seconds_total). On a GB10 the clock event flags stay clear while these grow: read these. sw_power_cap growing under load is the ~100 W platform cap, not throttling; sw/hw thermal slowdown is throttling (SparkGPUThrottling fires above the dashed line, "+fmt.Sprintf("%.0f s a minute", 60*judge.ThermalSlowdownShare)+", held 5 minutes): check airflow.",
		"s", 12, 9).
		AxisSoftMin(0).
		ThresholdsStyle(thresholdsAs(common.GraphThresholdsStyleModeDashed)).
		Thresholds(thresholds("transparent", step(60*judge.ThermalSlowdownShare, "red"))).
		Min(0).
		Max(60).
		WithTarget(rangeQuery("A", `60 * rate(spark_gpu_clocks_event_seconds_total{instance=~"$instance"}[$__rate_interval])`, "{{instance}} gpu{{gpu}} {{reason}}")))
	b.WithPanel(timeseriesPanel(46, "Thermal margin",
		"Degrees left before the GPU's slowdown temperature (nvidia-smi's GPU T.Limit Temp, spark_gpu_temperature_margin_celsius): 13 °C at 81 °C on a real unit. Near 0 the driver slows the clocks: improve airflow before a long run.",
		"celsius", 6, 9).
		AxisSoftMin(0).
		ThresholdsStyle(thresholdsAs(common.GraphThresholdsStyleModeLine)).
		Min(0).
		Thresholds(thresholds("red", step(5, "orange"), step(15, "green"))).
		WithTarget(rangeQuery("A", `spark_gpu_temperature_margin_celsius{instance=~"$instance"}`, "{{instance}} gpu{{gpu}}")))
	b.WithPanel(timeseriesPanel(47, "P-state",
		"The GPU's performance state (spark_gpu_performance_state): P0 is full speed under load, P8 is idle (a GB10 at rest reads P8, 36 °C, 3 W). Not P0 while a run is busy: compare with GPU power for the stuck-low fault.",
		"none", 6, 9).
		AxisSoftMin(0).
		LineInterpolation(common.LineInterpolationStepAfter).
		Decimals(0).
		Min(0).
		Max(15).
		WithTarget(rangeQuery("A", `spark_gpu_performance_state{instance=~"$instance"}`, "{{instance}} gpu{{gpu}}")))
	b.WithRow(row(48, "Fabric: the ConnectX-7 link between two Sparks"))
	b.WithPanel(stateTimelinePanel(49, "Fabric ports",
		"Each ConnectX-7 function's port: up when ACTIVE and LinkUp. A port that carried traffic and went down: the other Spark was unplugged or the link failed; check the cable and the other end (SparkFabricLinkDown). A port that was never up has no cable.",
		"none", 12, 8).
		ShowValue(common.VisibilityModeNever).
		Mappings(mappings(valueMap(
			"0", "down", "red",
			"1", "up", "green",
		))).
		WithTarget(rangeQuery("A", `spark_fabric_link_up{instance=~"$instance"}`, "{{instance}} {{device}} port {{port}}")))
	b.WithPanel(statPanel(50, "Negotiated rate",
		fmt.Sprintf("The rate each up port negotiated. A ConnectX-7 port of a DGX Spark runs at %.0f Gb/s; less is a link trained down: reseat or replace the cable.", fabricRateBits/1e9),
		"bps", 6, 8).
		Thresholds(thresholds("orange", step(fabricRateBits, "green"))).
		WithTarget(instantQuery("A", `spark_fabric_link_rate_bits_per_second{instance=~"$instance"}`, "{{instance}} {{device}}")))
	b.WithPanel(statPanel(51, "Fabric sources",
		"Whether this Spark has RDMA devices, their hardware counters and a readable PCIe link. absent for rdma: no ConnectX-7 driver loaded (or no fabric); the other fabric panels stay empty.",
		"none", 6, 8).
		Decimals(0).
		Mappings(mappings(valueMap(
			"0", "absent", "orange",
			"1", "present", "green",
		))).
		WithTarget(instantQuery("A", `spark_fabric_field_supported{instance=~"$instance"}`, "{{instance}} {{field}}")))
	b.WithPanel(timeseriesPanel(52, "PCIe link against its maximum",
		"Each function's PCIe link: lanes and speed as a share of what the device can do. Under 100% the function trained narrower or slower (SparkFabricPCIeDegraded) and its throughput is capped: reseat the card or power-cycle.",
		"percentunit", 8, 8).
		AxisSoftMin(0).
		Max(1.05).
		ThresholdsStyle(thresholdsAs(common.GraphThresholdsStyleModeDashed)).
		Thresholds(thresholds("red", step(1, "transparent"))).
		OverrideByQuery("B", props(lineStyle(dashed))).
		WithTarget(rangeQuery("A", `spark_fabric_pcie_link_width{instance=~"$instance", which="current"} / ignoring (which) spark_fabric_pcie_link_width{instance=~"$instance", which="max"}`, "{{instance}} {{device}} width")).
		WithTarget(rangeQuery("B", `spark_fabric_pcie_link_transfers_per_second{instance=~"$instance", which="current"} / ignoring (which) spark_fabric_pcie_link_transfers_per_second{instance=~"$instance", which="max"}`, "{{instance}} {{device}} speed")))
	b.WithPanel(timeseriesPanel(53, "Fabric throughput",
		"Bytes received and sent per second on each function. Traffic on one function of a port and not the other halves what the link carries (SparkFabricRailImbalance): check NCCL's interface list covers both.",
		"Bps", 8, 8).
		AxisSoftMin(0).
		OverrideByQuery("B", props(lineStyle(dashed))).
		WithTarget(rangeQuery("A", `rate(spark_fabric_receive_bytes_total{instance=~"$instance"}[$__rate_interval])`, "{{instance}} {{device}} receive")).
		WithTarget(rangeQuery("B", `rate(spark_fabric_transmit_bytes_total{instance=~"$instance"}[$__rate_interval])`, "{{instance}} {{device}} transmit")))
	b.WithPanel(timeseriesPanel(54, "Fabric errors and congestion",
		"Port errors (symbol errors, receive errors, discards, link downs) and RoCE congestion and loss events per second, by device. Errors that keep growing are a bad cable or connector (SparkFabricErrors); congestion notifications alone are flow control at work.",
		"cps", 8, 8).
		AxisSoftMin(0).
		OverrideByQuery("B", props(lineStyle(dashed))).
		WithTarget(rangeQuery("A", `sum by (instance, device) (rate(spark_fabric_port_errors_total{instance=~"$instance"}[$__rate_interval]))`, "{{instance}} {{device}} port errors")).
		WithTarget(rangeQuery("B", `sum by (instance, device) (rate(spark_fabric_roce_events_total{instance=~"$instance"}[$__rate_interval]))`, "{{instance}} {{device}} RoCE events")))
	inferenceEngines(b)
	return b
}

// inferenceEngines is the engines' own account beside the pool's: what
// their KV cache holds, whether they preempt, what they serve and at what
// energy, and what Ollama keeps loaded.
func inferenceEngines(b *dashboard.DashboardBuilder) {
	b.WithRow(row(60, "Inference engines: their own account"))
	b.WithPanel(timeseriesPanel(61, "KV cache in use",
		"Each engine's KV cache in use (vLLM, SGLang, llama.cpp's server). Near 100% the engine preempts requests or makes them wait; under pool pressure it cannot grow: see Preemptions and the pool.",
		"percentunit", 8, 8).
		AxisSoftMin(0).
		Max(1).
		WithTarget(rangeQuery("A", `spark_engine_kv_cache_usage_ratio{instance=~"$instance"}`, "{{instance}} {{kind}} ({{pid}})")))
	b.WithPanel(timeseriesPanel(62, "Preemptions per second",
		"Requests each engine preempted: their KV cache was lost and is computed again. Rising while the pool is short or a training job runs beside it is contention (SparkInferencePreempting): give the engine room or move the other job.",
		"reqps", 8, 8).
		AxisSoftMin(0).
		WithTarget(rangeQuery("A", `rate(spark_engine_preemptions_total{instance=~"$instance"}[$__rate_interval])`, "{{instance}} {{kind}} ({{pid}})")))
	b.WithPanel(timeseriesPanel(63, "Requests running and waiting",
		"Requests each engine holds. Waiting requests that pile up while few run: the engine has no room for them (KV cache full) or is overloaded.",
		"none", 8, 8).
		AxisSoftMin(0).
		OverrideByQuery("B", props(lineStyle(dashed))).
		WithTarget(rangeQuery("A", `spark_engine_requests{instance=~"$instance", state="running"}`, "{{instance}} {{kind}} ({{pid}}) running")).
		WithTarget(rangeQuery("B", `spark_engine_requests{instance=~"$instance", state="waiting"}`, "{{instance}} {{kind}} ({{pid}}) waiting")))
	b.WithPanel(timeseriesPanel(64, "Tokens per second",
		"Tokens each engine generates (and reads from prompts, dashed). A drop while requests wait: the engine slowed (preemptions, a throttled GPU, memory stalls); check the panels beside it.",
		"none", 8, 8).
		AxisSoftMin(0).
		OverrideByQuery("B", props(lineStyle(dashed))).
		WithTarget(rangeQuery("A", `rate(spark_engine_tokens_total{instance=~"$instance", tokens="generation"}[$__rate_interval])`, "{{instance}} {{kind}} ({{pid}}) generated")).
		WithTarget(rangeQuery("B", `rate(spark_engine_tokens_total{instance=~"$instance", tokens="prompt"}[$__rate_interval])`, "{{instance}} {{kind}} ({{pid}}) prompt")))
	b.WithPanel(timeseriesPanel(65, "Joules per generated token",
		"The GPU's energy over the tokens the engines generated, 5-minute rates (instance:spark_gpu_energy_joules_per_generated_token:ratio_rate5m). Rising at the same load: the GPU is throttled or the engine recomputes (preemptions). Empty while nothing is generated, or where NVML gives no energy counter.",
		"none", 8, 8).
		AxisSoftMin(0).
		WithTarget(rangeQuery("A", `instance:spark_gpu_energy_joules_per_generated_token:ratio_rate5m{instance=~"$instance"}`, "{{instance}}")))
	b.WithPanel(tablePanel(66, "Models Ollama holds",
		"Each model Ollama keeps loaded, its size in memory, and the seconds left of its keep-alive: after the last request the model stays resident that long (where did my memory go). Unload it early with `ollama stop MODEL`, or set a shorter keep_alive.",
		"none", 8, 8).
		NoValue("no Ollama model loaded").
		OverrideByName("Value #A", props(
			dynamic("displayName", "in memory"),
			dynamic("unit", "bytes"))).
		OverrideByName("Value #B", props(
			dynamic("displayName", "unloads in"),
			dynamic("unit", "s"))).
		WithTransformation(merge()).
		WithTransformation(organize([]string{"Time"}, []string{"instance", "model", "pid", "Value #A", "Value #B"})).
		WithTarget(tableQuery("A", `max by (instance, pid, model) (spark_engine_model_bytes{instance=~"$instance"})`)).
		WithTarget(tableQuery("B", `max by (instance, pid, model) (spark_engine_model_unload_seconds{instance=~"$instance"})`)))
	b.WithPanel(tablePanel(67, "Containers",
		"The containers GPU programs run in, as the Docker Engine names them (with --workloads.docker-socket): match the container column of GPU-resident programs. Empty without the flag, or when the exporter's user may not read the Docker socket.",
		"none", 12, 6).
		NoValue("no container named (--workloads.docker-socket not given)").
		WithTransformation(organize([]string{"Time", "Value", "__name__"}, []string{"instance", "container", "name", "image", "compose_service"})).
		WithTarget(tableQuery("A", `spark_workload_container_info{instance=~"$instance"}`)))
	b.WithPanel(stateTimelinePanel(68, "Engines answering",
		"Whether each engine answered its metrics (Ollama: /api/ps) on loopback. Down while the program runs: it listens elsewhere (--engines.target), asks for a key (--engines.bearer-token-file), or SGLang runs without --enable-metrics; the exporter's log says which.",
		"none", 12, 6).
		ShowValue(common.VisibilityModeNever).
		Mappings(mappings(valueMap(
			"0", "not answering", "red",
			"1", "answering", "green",
		))).
		WithTarget(rangeQuery("A", `spark_engine_up{instance=~"$instance"}`, "{{instance}} {{kind}} ({{pid}})")))
}
