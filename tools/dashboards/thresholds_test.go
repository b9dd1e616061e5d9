package main

import (
	"fmt"
	"math"
	"testing"

	"github.com/grafana/grafana-foundation-sdk/go/dashboard"

	"github.com/spark-exporter/spark_exporter/internal/judge"
)

// stepsOf lists the threshold values of a panel: its defaults' and those
// its overrides set.
func stepsOf(p dashboard.Panel) []float64 {
	var vs []float64
	add := func(t *dashboard.ThresholdsConfig) {
		for _, s := range t.Steps {
			if s.Value != nil {
				vs = append(vs, *s.Value)
			}
		}
	}
	if p.FieldConfig == nil {
		return nil
	}
	if t := p.FieldConfig.Defaults.Thresholds; t != nil {
		add(t)
	}
	for _, o := range p.FieldConfig.Overrides {
		for _, prop := range o.Properties {
			if t, ok := prop.Value.(dashboard.ThresholdsConfig); ok {
				add(&t)
			}
		}
	}
	return vs
}

// The panels that show a judgement draw its threshold, the value
// internal/judge holds, so that the dashboards and the alerts, status page
// and report never disagree.
func TestPanelsDrawTheJudgements(t *testing.T) {
	want := []struct {
		file, panel string
		at          float64
		what        string
	}{
		{"spark.json", "Usable memory", judge.UsableLowBytes, "SparkPoolUsableLow's tier"},
		{"spark.json", "Usable memory", judge.UsableCriticalBytes, "SparkPoolUsableCritical's tier"},
		{"spark.json", "Usable memory against its tiers; headroom for a new job", judge.UsableLowBytes, "SparkPoolUsableLow's tier"},
		{"spark.json", "Usable memory against its tiers; headroom for a new job", judge.UsableCriticalBytes, "SparkPoolUsableCritical's tier"},
		{"spark.json", "New job: headroom after a flush", 0, "the reserve (headroom 0)"},
		{"spark.json", "GPU power", judge.RatingWatts, "the brick rating"},
		{"spark.json", "GPU power", judge.PlateauWatts, "the sustained plateau"},
		{"spark.json", "GPU utilisation", judge.BusyUtilizationRatio, "busy"},
		{"spark.json", "Seconds per minute in each clock event", 60 * judge.ThermalSlowdownShare, "thermal slowdown"},
		{"spark.json", "GPU-resident programs", math.Nextafter(judge.HeavyCapRatio, 1), "above the heavy-job cap"},
		{"fleet.json", "Sparks", 0, "the reserve (headroom 0)"},
		{"fleet.json", "Sparks", judge.UsableLowBytes, "SparkPoolUsableLow's tier"},
		{"fleet.json", "Sparks", judge.UsableCriticalBytes, "SparkPoolUsableCritical's tier"},
		{"fleet.json", "Sparks", judge.PlateauWatts, "the sustained plateau"},
		{"fleet.json", "Sparks", judge.RatingWatts, "the brick rating"},
	}
	for _, w := range want {
		t.Run(fmt.Sprintf("%s/%s/%s", w.file, w.panel, w.what), func(t *testing.T) {
			found := false
			for _, p := range panels(built(t, w.file)) {
				if deref(p.Title) != w.panel {
					continue
				}
				for _, v := range stepsOf(p) {
					found = found || v == w.at
				}
			}
			if !found {
				t.Errorf("%s: no panel %q has a threshold at %v (%s)", w.file, w.panel, w.at, w.what)
			}
		})
	}
}
