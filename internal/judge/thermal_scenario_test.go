package judge

import (
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/testing/standin"
)

// The GB10 stand-in's scenarios of issue 26, read as the sampler reads the
// library (every 5 s, whole degrees) and judged with the default
// configuration: a warm-up at flat power, a steady 88 °C run and counter
// blips are never throttled; a clock falling at flat power is, within one
// window of the fall. The end-to-end test plays the same scenarios through
// the library, Prometheus and the alert rules.
func TestStandInScenarios(t *testing.T) {
	cfg := DefaultThermalConfig()
	for _, tc := range []struct {
		name     string
		counters bool          // the scenario's driver answers the clock event counters
		holding  bool          // the signature's shape with the clock holding: watching
		fall     time.Duration // when the clock starts falling; 0: it never does
		evidence string        // of the first throttled verdict
	}{
		{name: "gb10-warmup-flat-90w", counters: true, holding: true},
		{name: "gb10-steady-88c", counters: true, holding: true},
		{name: "gb10-counter-blips", counters: true},
		{name: "gb10-clock-falls-flat-power", counters: true, fall: 10 * time.Minute, evidence: "thermal_slowdown_counters"},
		{name: "gb10-clock-fall-no-counters", fall: 20 * time.Minute, evidence: "signature+clock_fall"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text, err := os.ReadFile(filepath.Join("..", "..", "testdata", "nvml", "scenarios", tc.name+".scenario"))
			if err != nil {
				t.Fatal(err)
			}
			var samples []ThermalSample
			for at := time.Duration(0); at <= time.Hour; at += cfg.Interval {
				st, err := standin.Evaluate(text, 0, at.Seconds())
				if err != nil {
					t.Fatal(err)
				}
				reasons := st.Reasons
				s := ThermalSample{Time: t0.Add(at), Temperature: math.Round(st.Temperature), Power: st.Power,
					SMClock: ptr(st.SMClock * 1e6), Utilization: ptr(st.Utilization / 100), Reasons: &reasons,
					TemperatureMargin: ptr(math.Round(st.MarginCelsius))}
				if tc.counters {
					s.ThermalSlowdownSeconds = ptr(st.EventSeconds[269] + st.EventSeconds[270])
				}
				samples = append(samples, s)
			}
			steps, res := replaySteps(samples, cfg)
			var first *ThermalStep
			holding := false
			for i, st := range steps {
				holding = holding || st.Verdict.ClockHolding
				if st.Verdict.State == Throttled && first == nil {
					first = &steps[i]
				}
			}
			if tc.fall == 0 {
				if first != nil {
					t.Errorf("throttled at %v (evidence %s)", first.Time.Sub(t0), first.Verdict.Evidence())
				}
				if tc.holding && !holding {
					t.Errorf("never the signature with the clock holding: the scenario no longer tests what it says")
				}
				return
			}
			if first == nil {
				t.Fatal("never throttled")
			}
			if at := first.Time.Sub(t0); at < tc.fall || at > tc.fall+cfg.Window {
				t.Errorf("throttled at %v; the clock falls from %v", at, tc.fall)
			}
			if got := first.Verdict.Evidence(); got != tc.evidence {
				t.Errorf("evidence %q, want %s", got, tc.evidence)
			}
			if len(res.Episodes) != 1 || !res.Episodes[0].Open {
				t.Errorf("episodes %+v, want one, to the end", res.Episodes)
			}
		})
	}
}
