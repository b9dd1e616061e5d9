package main

// The conventions every panel of these dashboards follows, in one place:
// the datasource variable, the query editor's code mode, a legend that names
// the Spark, the same stat and graph options. A panel's code then says only
// what is particular to it.

import (
	"github.com/grafana/grafana-foundation-sdk/go/bargauge"
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/gauge"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/statetimeline"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// datasource follows the dashboard's datasource variable, so one import
// serves any Prometheus.
var datasource = common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${datasource}")}

// rangeQuery is a graph's query; legend names the Spark ({{instance}}) so
// series from several Sparks are told apart.
func rangeQuery(ref, expr, legend string) *prometheus.DataqueryBuilder {
	return query(ref, expr, legend).Range()
}

// instantQuery is a stat's query: only the latest value is shown.
func instantQuery(ref, expr, legend string) *prometheus.DataqueryBuilder {
	return query(ref, expr, legend).Instant()
}

// tableQuery is an instant query whose labels become a table's columns.
func tableQuery(ref, expr string) *prometheus.DataqueryBuilder {
	return query(ref, expr, "").Instant().Format(prometheus.PromQueryFormatTable)
}

func query(ref, expr, legend string) *prometheus.DataqueryBuilder {
	return prometheus.NewDataqueryBuilder().
		Datasource(datasource).
		RefId(ref).
		Expr(expr).
		LegendFormat(legend).
		EditorMode(prometheus.QueryEditorModeCode)
}

// A threshold step: from value at on, the colour.
type thresholdStep struct {
	at    float64
	color string
}

func step(at float64, color string) thresholdStep { return thresholdStep{at, color} }

// thresholds colours values below the first step with base.
func thresholds(base string, steps ...thresholdStep) *dashboard.ThresholdsConfigBuilder {
	ts := []dashboard.Threshold{{Color: base}}
	for _, s := range steps {
		ts = append(ts, dashboard.Threshold{Value: cog.ToPtr(s.at), Color: s.color})
	}
	return dashboard.NewThresholdsConfigBuilder().Mode(dashboard.ThresholdsModeAbsolute).Steps(ts)
}

// valueMap maps values to text and colour: value, text, colour, value,
// text, colour, ...
func valueMap(triples ...string) dashboard.ValueMapping {
	opts := map[string]dashboard.ValueMappingResult{}
	for i := 0; i+2 < len(triples); i += 3 {
		opts[triples[i]] = dashboard.ValueMappingResult{
			Text:  cog.ToPtr(triples[i+1]),
			Color: cog.ToPtr(triples[i+2]),
			Index: cog.ToPtr(int32(i / 3)),
		}
	}
	return dashboard.ValueMapping{ValueMap: &dashboard.ValueMap{Type: dashboard.MappingTypeValueToText, Options: opts}}
}

func mappings(ms ...dashboard.ValueMapping) []dashboard.ValueMapping { return ms }

// Field overrides.
func dynamic(id string, value any) dashboard.DynamicConfigValue {
	return dashboard.DynamicConfigValue{Id: id, Value: value}
}

func props(ps ...dashboard.DynamicConfigValue) []dashboard.DynamicConfigValue { return ps }

// dashed marks a derived series (what a flush would give, a maximum);
// dotted a fixed reference (the reserve).
var (
	dashed = common.LineStyle{Fill: cog.ToPtr(common.LineStyleFillDash), Dash: []float64{10, 10}}
	dotted = common.LineStyle{Fill: cog.ToPtr(common.LineStyleFillDot), Dash: []float64{2, 6}}
)

func lineStyle(s common.LineStyle) dashboard.DynamicConfigValue {
	return dynamic("custom.lineStyle", s)
}

func noFill() dashboard.DynamicConfigValue { return dynamic("custom.fillOpacity", 0) }

func fixedColor(color string) dashboard.DynamicConfigValue {
	return dynamic("color", dashboard.FieldColor{Mode: dashboard.FieldColorModeIdFixed, FixedColor: cog.ToPtr(color)})
}

func thresholdsOverride(t *dashboard.ThresholdsConfigBuilder) dashboard.DynamicConfigValue {
	c, err := t.Build()
	if err != nil {
		panic(err) // thresholds() builds nothing that can fail
	}
	return dynamic("thresholds", c)
}

func colorBy(mode dashboard.FieldColorModeId) *dashboard.FieldColorBuilder {
	return dashboard.NewFieldColorBuilder().Mode(mode)
}

// lastValue reduces a series to its latest non-null value.
func lastValue() *common.ReduceDataOptionsBuilder {
	return common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"}).Fields("").Values(false)
}

func row(id uint32, title string) *dashboard.RowBuilder {
	return dashboard.NewRowBuilder(title).Id(id).Collapsed(false)
}

// Panel sizes are given by width (of 24 columns) and height; the dashboard
// builder places them left to right, row after row.

func statPanel(id uint32, title, description, unit string, w, h uint32) *stat.PanelBuilder {
	return stat.NewPanelBuilder().
		Id(id).Title(title).Description(description).Unit(unit).Span(w).Height(h).
		Datasource(datasource).
		ColorScheme(colorBy(dashboard.FieldColorModeIdThresholds)).
		Thresholds(thresholds("green")).
		Mappings(mappings()).
		ReduceOptions(lastValue()).
		ColorMode(common.BigValueColorModeValue).
		GraphMode(common.BigValueGraphModeNone).
		JustifyMode(common.BigValueJustifyModeAuto).
		Orientation(common.VizOrientationAuto).
		TextMode(common.BigValueTextModeValueAndName).
		WideLayout(true).
		ShowPercentChange(false)
}

func timeseriesPanel(id uint32, title, description, unit string, w, h uint32) *timeseries.PanelBuilder {
	return timeseries.NewPanelBuilder().
		Id(id).Title(title).Description(description).Unit(unit).Span(w).Height(h).
		Datasource(datasource).
		ColorScheme(colorBy(dashboard.FieldColorModeIdPaletteClassic)).
		Thresholds(thresholds("green")).
		Mappings(mappings()).
		DrawStyle(common.GraphDrawStyleLine).
		LineWidth(1).
		FillOpacity(10).
		ShowPoints(common.VisibilityModeNever).
		SpanNulls(common.BoolOrFloat64{Bool: cog.ToPtr(false)}).
		AxisPlacement(common.AxisPlacementAuto).
		Stacking(common.NewStackingConfigBuilder().Mode(common.StackingModeNone).Group("A")).
		ThresholdsStyle(common.NewGraphThresholdsStyleConfigBuilder().Mode(common.GraphThresholdsStyleModeOff)).
		Legend(common.NewVizLegendOptionsBuilder().
			DisplayMode(common.LegendDisplayModeTable).
			Placement(common.LegendPlacementBottom).
			ShowLegend(true).
			Calcs([]string{"lastNotNull", "max"})).
		Tooltip(common.NewVizTooltipOptionsBuilder().Mode(common.TooltipDisplayModeMulti).Sort(common.SortOrderDescending))
}

func stateTimelinePanel(id uint32, title, description, unit string, w, h uint32) *statetimeline.PanelBuilder {
	return statetimeline.NewPanelBuilder().
		Id(id).Title(title).Description(description).Unit(unit).Span(w).Height(h).
		Datasource(datasource).
		ColorScheme(colorBy(dashboard.FieldColorModeIdThresholds)).
		Thresholds(thresholds("green")).
		Mappings(mappings()).
		FillOpacity(80).
		LineWidth(0).
		ShowValue(common.VisibilityModeAuto).
		MergeValues(true).
		RowHeight(0.8).
		AlignValue(common.TimelineValueAlignmentLeft).
		Legend(common.NewVizLegendOptionsBuilder().
			DisplayMode(common.LegendDisplayModeList).
			Placement(common.LegendPlacementBottom).
			ShowLegend(true)).
		Tooltip(common.NewVizTooltipOptionsBuilder().Mode(common.TooltipDisplayModeSingle).Sort(common.SortOrderNone))
}

func tablePanel(id uint32, title, description, unit string, w, h uint32) *table.PanelBuilder {
	return table.NewPanelBuilder().
		Id(id).Title(title).Description(description).Unit(unit).Span(w).Height(h).
		Datasource(datasource).
		ColorScheme(colorBy(dashboard.FieldColorModeIdThresholds)).
		Thresholds(thresholds("green")).
		Mappings(mappings()).
		Align(common.FieldTextAlignmentAuto).
		CellOptions(common.TableCellOptions{TableAutoCellOptions: &common.TableAutoCellOptions{Type: common.TableCellDisplayModeAuto}}).
		Inspect(false).
		ShowHeader(true).
		CellHeight(common.TableCellHeightSm).
		Footer(common.NewTableFooterOptionsBuilder().Show(false).Reducer([]string{"sum"}).Fields([]string{}))
}

// sortBy sorts a table by one column.
func sortBy(column string, desc bool) []cog.Builder[common.TableSortByFieldState] {
	return []cog.Builder[common.TableSortByFieldState]{
		common.NewTableSortByFieldStateBuilder().DisplayName(column).Desc(desc),
	}
}

func gaugePanel(id uint32, title, description, unit string, w, h uint32) *gauge.PanelBuilder {
	return gauge.NewPanelBuilder().
		Id(id).Title(title).Description(description).Unit(unit).Span(w).Height(h).
		Datasource(datasource).
		ColorScheme(colorBy(dashboard.FieldColorModeIdThresholds)).
		Thresholds(thresholds("green")).
		Mappings(mappings()).
		ReduceOptions(lastValue()).
		ShowThresholdLabels(false).
		ShowThresholdMarkers(true).
		Orientation(common.VizOrientationAuto).
		Sizing(common.BarGaugeSizingAuto).
		MinVizWidth(75).
		MinVizHeight(75)
}

func barGaugePanel(id uint32, title, description, unit string, w, h uint32) *bargauge.PanelBuilder {
	return bargauge.NewPanelBuilder().
		Id(id).Title(title).Description(description).Unit(unit).Span(w).Height(h).
		Datasource(datasource).
		ColorScheme(colorBy(dashboard.FieldColorModeIdThresholds)).
		Thresholds(thresholds("green")).
		Mappings(mappings()).
		ReduceOptions(lastValue()).
		DisplayMode(common.BarGaugeDisplayModeBasic).
		Orientation(common.VizOrientationHorizontal).
		ShowUnfilled(true).
		ValueMode(common.BarGaugeValueModeColor).
		NamePlacement(common.BarGaugeNamePlacementAuto).
		Sizing(common.BarGaugeSizingAuto).
		MinVizWidth(8).
		MinVizHeight(16).
		MaxVizHeight(300)
}

// thresholdsAs draws a graph's thresholds (off, a line, a dashed line...).
func thresholdsAs(mode common.GraphThresholdsStyleMode) *common.GraphThresholdsStyleConfigBuilder {
	return common.NewGraphThresholdsStyleConfigBuilder().Mode(mode)
}

// merge joins the frames of a table's queries into one, row by label set.
func merge() dashboard.DataTransformerConfig {
	return dashboard.DataTransformerConfig{Id: "merge", Options: map[string]any{}}
}

// organize hides columns and puts the others in order.
func organize(hide, order []string) dashboard.DataTransformerConfig {
	excluded := map[string]bool{}
	for _, c := range hide {
		excluded[c] = true
	}
	index := map[string]int{}
	for i, c := range order {
		index[c] = i
	}
	return dashboard.DataTransformerConfig{Id: "organize", Options: map[string]any{
		"excludeByName": excluded,
		"indexByName":   index,
		"renameByName":  map[string]string{},
	}}
}

// datasourceVariable picks the Prometheus every query goes to.
func datasourceVariable() *dashboard.DatasourceVariableBuilder {
	return dashboard.NewDatasourceVariableBuilder("datasource").
		Label("Data source").
		Type("prometheus").
		Hide(dashboard.VariableHideDontHide).
		Multi(false).
		IncludeAll(false).
		Regex("")
}

// instanceVariable offers every Spark that runs the exporter; several (or
// All) may be picked, each query then matches instance=~"$instance".
func instanceVariable() *dashboard.QueryVariableBuilder {
	const values = "label_values(spark_exporter_build_info, instance)"
	return dashboard.NewQueryVariableBuilder("instance").
		Label("Spark").
		Datasource(datasource).
		Definition(values).
		Query(dashboard.StringOrMap{Map: map[string]any{
			"qryType": 1,
			"query":   values,
			"refId":   "PrometheusVariableQueryEditor-VariableQuery",
		}}).
		Hide(dashboard.VariableHideDontHide).
		Multi(true).
		IncludeAll(true).
		AllValue(".*").
		Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
		Sort(dashboard.VariableSortAlphabeticalAsc).
		Regex("")
}

// builtInAnnotations is Grafana's own "Annotations & Alerts", which every
// dashboard has; written out so an import does not add it as a change.
func builtInAnnotations() *dashboard.AnnotationQueryBuilder {
	return dashboard.NewAnnotationQueryBuilder().
		Name("Annotations & Alerts").
		BuiltIn(1).
		Datasource(common.DataSourceRef{Type: cog.ToPtr("grafana"), Uid: cog.ToPtr("-- Grafana --")}).
		Enable(true).
		Hide(true).
		IconColor("rgba(0, 211, 255, 1)").
		Type("dashboard")
}

// alertAnnotations marks when a Spark alert fired on the selected Sparks.
func alertAnnotations() *dashboard.AnnotationQueryBuilder {
	return dashboard.NewAnnotationQueryBuilder().
		Name("Spark alerts").
		Datasource(datasource).
		Enable(true).
		Hide(false).
		IconColor("red").
		Expr(`ALERTS{alertname=~"Spark.*", alertstate="firing", instance=~"$instance"}`).
		Step("60s").
		TitleFormat("{{alertname}}").
		TextFormat("{{instance}} ({{severity}})").
		TagKeys("severity").
		UseValueForTime(false)
}
