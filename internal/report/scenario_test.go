package report

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/judge"
	"github.com/spark-exporter/spark_exporter/internal/testing/standin"
	"github.com/spark-exporter/spark_exporter/internal/thermallog"
)

// scenarioLog is the log the exporter's --thermal.csv-file would hold,
// with clocks, utilisation and the slowdown counters, of a stand-in
// scenario sampled every 5 s for span.
func scenarioLog(t *testing.T, name string, span time.Duration) thermallog.Trace {
	t.Helper()
	text, err := os.ReadFile(filepath.Join("..", "..", "testdata", "nvml", "scenarios", name+".scenario"))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2025, 11, 24, 14, 0, 0, 0, time.UTC)
	tr := thermallog.Trace{Format: thermallog.FormatCSV,
		Columns: []string{"clocks.sm", "clocks_event_reasons", "power.draw", "temperature.gpu", "timestamp", "utilization.gpu"}}
	for at := time.Duration(0); at <= span; at += 5 * time.Second {
		st, err := standin.Evaluate(text, 0, at.Seconds())
		if err != nil {
			t.Fatal(err)
		}
		temp, power, clock, util := st.Temperature, st.Power, st.SMClock*1e6, st.Utilization/100
		tr.Rows = append(tr.Rows, thermallog.Row{Time: start.Add(at), Temperature: &temp, Power: &power, SMClock: &clock, Utilization: &util,
			Reasons: &st.Reasons, Name: "NVIDIA GB10",
			EventSeconds: map[string]float64{"sw_thermal_slowdown": st.EventSeconds[269], "hw_thermal_slowdown": st.EventSeconds[270], "sw_power_cap": st.EventSeconds[74]}})
	}
	return tr
}

// The stand-in scenarios, each reproducing public GB10 captures
// (the sources in each file's header): a warm-up at a flat ~90 W, an hour
// at 88 °C with the clock steady and counter blips of a fraction of a
// percent are never throttled; a clock falling 2.45 → 2.0 GHz at 90 °C and
// flat power is throttled within one window of the fall.
func TestScenarioVerdicts(t *testing.T) {
	cfg := judge.DefaultThermalConfig()
	for _, tc := range []struct {
		name      string
		span      time.Duration
		throttled bool
	}{
		{"gb10-warmup-flat-90w", 30 * time.Minute, false},
		{"gb10-steady-88c", 60 * time.Minute, false},
		{"gb10-counter-blips", 30 * time.Minute, false},
		{"gb10-clock-falls-flat-power", 40 * time.Minute, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := FromLog(scenarioLog(t, tc.name, tc.span), cfg, LogOptions{})
			if err != nil {
				t.Fatal(err)
			}
			got := len(r.Throttle.Episodes) > 0
			if got != tc.throttled {
				t.Fatalf("throttled %v, want %v: %s", got, tc.throttled, r.Verdict)
			}
			if tc.throttled {
				// The clock starts falling at 10m; one window later at most.
				fall := r.Start.Add(10 * time.Minute)
				if e := r.Throttle.Episodes[0]; e.Start.After(fall.Add(cfg.Window)) {
					t.Errorf("throttled from %v, more than a window after the clock fell at %v", e.Start, fall)
				}
			}
		})
	}
}
