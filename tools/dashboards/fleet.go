package main

//lint:file-ignore SA1019 the classic dashboard model (dashboard, not dashboardv2), which Grafana 12 imports and provisions by default; schema v2 still needs a feature flag there (docs/dashboards.md)

import (
	"fmt"
	"math"

	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"

	"github.com/spark-exporter/spark_exporter/internal/judge"
)

// sparkDashboardUID is spark.json's uid: the fleet table links each Spark to
// it.
const sparkDashboardUID = "spark-exporter"

// thermalCode turns the one-hot spark_thermal_state into one value per
// Spark, its worst GPU's state: 0 collecting, 1 normal, 2 watching, 3
// throttled (thermalStates maps them back to words).
const thermalCode = `max by (instance) (
    (spark_thermal_state{instance=~"$instance", state="collecting"} == 1) * 0
  or (spark_thermal_state{instance=~"$instance", state="normal"} == 1) * 1
  or (spark_thermal_state{instance=~"$instance", state="watching"} == 1) * 2
  or (spark_thermal_state{instance=~"$instance", state="throttled"} == 1) * 3
)`

var thermalStates = valueMap(
	"0", "collecting", "blue",
	"1", "normal", "green",
	"2", "watching", "yellow",
	"3", "throttled", "red",
)

// fleet is every Spark in one table, for owners of several. Each column is
// one instant query aggregated by instance, so a row holds one Spark's
// figures and nothing of another's; where the raw series would be many per
// Spark (a process each, every alert Prometheus holds) the column reads a
// recording rule of rules/spark.rules.yml instead (docs/dashboards.md gives
// the series each query touches).
func fleet() *dashboard.DashboardBuilder {
	b := dashboard.NewDashboardBuilder("DGX Spark fleet").
		Uid("spark-exporter-fleet").
		Description("Every DGX Spark that runs spark_exporter in one table: usable memory, headroom, thermal state, power, the workloads on the pool, firing alerts, exporter version. Click a Spark for its own dashboard.").
		Tags([]string{"spark", "gb10", "nvidia", "fleet"}).
		Editable().
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		Refresh("1m").
		Time("now-1h", "now").
		Timezone(common.TimeZoneBrowser).
		Version(1).
		WithVariable(datasourceVariable()).
		WithVariable(instanceVariable()).
		Annotation(builtInAnnotations())

	b.WithRow(row(1, "The fleet now"))
	b.WithPanel(statPanel(2, "Sparks reporting",
		"Sparks whose exporter answered the last scrape. Fewer than you own: a Spark is down or unreachable (SparkHostSilent pages for it).",
		"none", 6, 4).
		Decimals(0).
		TextMode(common.BigValueTextModeValue).
		Thresholds(thresholds("blue")).
		WithTarget(instantQuery("A", `count(spark_exporter_build_info{instance=~"$instance"})`, "Sparks")))
	b.WithPanel(statPanel(3, "Usable memory low",
		fmt.Sprintf("Sparks whose usable memory (MemAvailable − CmaFree) is under %.0f GiB (SparkPoolUsableLow): the engine's peak nears the pool, and a global OOM kill takes the monitoring first. The table is sorted least usable first: open the Spark and find what grew.", float64(judge.UsableLowBytes)/(1<<30)),
		"none", 6, 4).
		Decimals(0).
		TextMode(common.BigValueTextModeValue).
		Thresholds(thresholds("green", step(1, "red"))).
		WithTarget(instantQuery("A", fmt.Sprintf(`count(spark_pool_usable_bytes{instance=~"$instance"} < %d) or vector(0)`, int64(judge.UsableLowBytes)), "Sparks")))
	b.WithPanel(statPanel(4, "Throttled",
		"Sparks with a GPU in the throttled state (temperature climbing or holding hot while power sits flat below the rating): check their airflow and room.",
		"none", 6, 4).
		Decimals(0).
		TextMode(common.BigValueTextModeValue).
		Thresholds(thresholds("green", step(1, "red"))).
		WithTarget(instantQuery("A", `count(max by (instance) (spark_thermal_state{instance=~"$instance", state="throttled"}) == 1) or vector(0)`, "Sparks")))
	b.WithPanel(statPanel(5, "Spark alerts firing",
		"Spark alerts firing across the fleet (instance:spark_alerts_firing:count). The table says where; each alert's runbook says what to do.",
		"none", 6, 4).
		Decimals(0).
		TextMode(common.BigValueTextModeValue).
		Thresholds(thresholds("green", step(1, "red"))).
		WithTarget(instantQuery("A", `sum(instance:spark_alerts_firing:count{instance=~"$instance"}) or vector(0)`, "alerts")))

	b.WithRow(row(6, "Every Spark"))
	b.WithPanel(tablePanel(7, "Sparks",
		fmt.Sprintf("One row per Spark, least usable memory first; click a column to sort by it, a Spark to open its dashboard. Usable is MemAvailable − CmaFree, the danger figure: orange under %.0f GiB (SparkPoolUsableLow), red under %.0f GiB (SparkPoolUsableCritical). Headroom is for a new job: free memory less free CMA and the reserve, below 0 when the page cache fills the pool (a flush first, not a fault). Power: orange from the ~%.0f W plateau (the platform's cap, not a fault), red at the %.0f W rating. Workloads counts the GPU programs by role; two heavy jobs on one pool evict each other (SparkConcurrentHeavyWorkloads). Tokens/s, KV cache (the fullest engine's) and preemptions/s are the inference engines' own account: preemptions above 0 while the pool is short is SparkInferencePreempting. An empty row but for its alerts is a Spark whose exporter is not answering.", float64(judge.UsableLowBytes)/(1<<30), float64(judge.UsableCriticalBytes)/(1<<30), judge.PlateauWatts, judge.RatingWatts),
		"none", 24, 16).
		SortBy(sortBy("usable", false)).
		OverrideByName("instance", props(
			dynamic("displayName", "Spark"),
			dynamic("links", []map[string]any{{
				"title": "${__value.text}: its dashboard",
				"url":   "/d/" + sparkDashboardUID + "?var-datasource=${datasource}&var-instance=${__value.raw}&${__url_time_range}",
			}}))).
		OverrideByName("Value #J", props(
			dynamic("displayName", "usable"),
			dynamic("unit", "bytes"),
			thresholdsOverride(thresholds("red", step(judge.UsableCriticalBytes, "orange"), step(judge.UsableLowBytes, "green"))),
			dynamic("custom.cellOptions", map[string]any{"type": "color-text"}))).
		OverrideByName("Value #A", props(
			dynamic("displayName", "headroom"),
			dynamic("unit", "bytes"),
			thresholdsOverride(thresholds("red", step(0, "orange"), step(roomyHeadroomBytes, "green"))),
			dynamic("custom.cellOptions", map[string]any{"type": "color-text"}))).
		OverrideByName("Value #B", props(
			dynamic("displayName", "after a flush"),
			dynamic("unit", "bytes"))).
		OverrideByName("Value #C", props(
			dynamic("displayName", "thermal"),
			dynamic("mappings", mappings(thermalStates)),
			dynamic("custom.cellOptions", map[string]any{"type": "color-text"}))).
		OverrideByName("Value #D", props(
			dynamic("displayName", "GPU power"),
			dynamic("unit", "watt"),
			thresholdsOverride(thresholds("green", step(judge.PlateauWatts, "orange"), step(judge.RatingWatts, "red"))),
			dynamic("custom.cellOptions", map[string]any{"type": "color-text"}))).
		OverrideByName("Value #E", props(
			dynamic("displayName", "inference"),
			dynamic("decimals", 0))).
		OverrideByName("Value #F", props(
			dynamic("displayName", "training"),
			dynamic("decimals", 0))).
		OverrideByName("Value #G", props(
			dynamic("displayName", "held by workloads"),
			dynamic("unit", "bytes"))).
		OverrideByName("Value #H", props(
			dynamic("displayName", "alerts firing"),
			dynamic("decimals", 0),
			dynamic("noValue", "0"),
			thresholdsOverride(thresholds("green", step(1, "red"))),
			dynamic("custom.cellOptions", map[string]any{"type": "color-text"}))).
		OverrideByName("Value #M", props(
			dynamic("displayName", "tokens/s"),
			dynamic("decimals", 0))).
		OverrideByName("Value #N", props(
			dynamic("displayName", "KV cache"),
			dynamic("unit", "percentunit"))).
		OverrideByName("Value #O", props(
			dynamic("displayName", "preemptions/s"),
			dynamic("noValue", "0"),
			thresholdsOverride(thresholds("green", step(math.SmallestNonzeroFloat64, "orange"))),
			dynamic("custom.cellOptions", map[string]any{"type": "color-text"}))).
		OverrideByName("version", props(
			dynamic("displayName", "exporter"))).
		WithTransformation(merge()).
		WithTransformation(organize(
			[]string{"Time", "Value #I"},
			[]string{"instance", "Value #J", "Value #A", "Value #B", "Value #C", "Value #D", "Value #E", "Value #F", "Value #G", "Value #M", "Value #N", "Value #O", "Value #H", "version"})).
		WithTarget(tableQuery("J", `min by (instance) (spark_pool_usable_bytes{instance=~"$instance"})`)).
		WithTarget(tableQuery("A", `max by (instance) (spark_pool_headroom_bytes{instance=~"$instance"})`)).
		WithTarget(tableQuery("B", `max by (instance) (spark_pool_headroom_after_flush_bytes{instance=~"$instance"})`)).
		WithTarget(tableQuery("C", thermalCode)).
		WithTarget(tableQuery("D", `max by (instance) (spark_gpu_power_watts{instance=~"$instance"})`)).
		WithTarget(tableQuery("E", `sum by (instance) (spark_workloads{instance=~"$instance", role="inference"})`)).
		WithTarget(tableQuery("F", `sum by (instance) (spark_workloads{instance=~"$instance", role="training"})`)).
		WithTarget(tableQuery("G", `sum by (instance) (instance:spark_workload_resident_bytes:sum{instance=~"$instance"})`)).
		WithTarget(tableQuery("H", `sum by (instance) (instance:spark_alerts_firing:count{instance=~"$instance"})`)).
		WithTarget(tableQuery("I", `max by (instance, version) (spark_exporter_build_info{instance=~"$instance"})`)).
		WithTarget(tableQuery("M", `sum by (instance) (instance:spark_engine_generated_tokens:rate5m{instance=~"$instance"})`)).
		WithTarget(tableQuery("N", `max by (instance) (instance:spark_engine_kv_cache_usage_ratio:max{instance=~"$instance"})`)).
		WithTarget(tableQuery("O", `sum by (instance) (instance:spark_engine_preemptions:rate5m{instance=~"$instance"})`)))
	return b
}
