package judge

import (
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/thermallog"
)

// run is a GB10 run sampled every 5 s for d: temperature (°C), power (W)
// and SM clock (GHz; NaN: not logged) as functions of the time since its
// start, busy throughout; thermal counters (seconds) where slowdown is not
// nil.
type run struct {
	d                  time.Duration
	temp, power, clock func(m float64) float64 // m: minutes since the start
	slowdown           func(m float64) float64
	margin             func(m float64) float64
	util               func(m float64) float64 // nil: 0.97
	withoutUtilization bool
}

func (r run) samples() []ThermalSample {
	var out []ThermalSample
	for at := time.Duration(0); at <= r.d; at += 5 * time.Second {
		m := at.Minutes()
		s := ThermalSample{Time: t0.Add(at), Temperature: r.temp(m), Power: r.power(m)}
		if c := r.clock(m); !math.IsNaN(c) {
			s.SMClock = ptr(c * 1e9)
		}
		switch {
		case r.util != nil:
			s.Utilization = ptr(r.util(m))
		case !r.withoutUtilization:
			s.Utilization = ptr(0.97)
		}
		if r.slowdown != nil {
			s.ThermalSlowdownSeconds = ptr(r.slowdown(m))
		}
		if r.margin != nil {
			s.TemperatureMargin = ptr(r.margin(m))
		}
		out = append(out, s)
	}
	return out
}

func constant(v float64) func(float64) float64 { return func(float64) float64 { return v } }

// ripple is v with a deterministic wobble of ±a.
func ripple(v, a float64) func(float64) float64 {
	return func(m float64) float64 { return v + a*math.Sin(m*7.3) }
}

// The stand-in cases of docs/thermal.md: a warm-up, a hot steady run and
// counter blips are never throttled; a clock that falls at flat power is,
// within one window.
func TestClockLossVerdicts(t *testing.T) {
	cfg := DefaultThermalConfig()
	for _, tc := range []struct {
		name string
		run  run
		// never: never Throttled; else throttled from onset (minutes)
		// within one window and two intervals.
		never    bool
		onset    float64
		evidence string // of the first throttled verdict
		// watchingText: some verdict is Watching with the clock holding.
		clockHolding bool
	}{
		{name: "warm-up from cool at a flat 90 W, clock steady", never: true, clockHolding: true, run: run{d: 30 * time.Minute,
			temp:  func(m float64) float64 { return 45 + 38*(1-math.Exp(-m/12)) }, // still climbing at 30 min
			power: ripple(90, 3), clock: ripple(2.45, 0.03)}},
		{name: "steady 88 °C, clock floating 2.42–2.45 GHz", never: true, clockHolding: true, run: run{d: 40 * time.Minute,
			temp: ripple(88.4, 0.5), power: ripple(92, 4), clock: ripple(2.435, 0.015)}},
		{name: "healthy 84–86 °C for 40 minutes", never: true, run: run{d: 40 * time.Minute,
			temp: ripple(85, 1), power: ripple(90, 5), clock: ripple(2.45, 0.06)}},
		{name: "counter blips of milliseconds at a hot peak", never: true, clockHolding: true, run: run{d: 40 * time.Minute,
			temp: ripple(88.4, 0.5), power: ripple(92, 4), clock: ripple(2.435, 0.015),
			slowdown: func(m float64) float64 { return 0.003 * math.Floor(m/2) }}}, // 3 ms every 2 minutes
		{name: "clock falling 2.45 → 2.0 GHz at 90 °C, flat power", onset: 20, evidence: "signature+clock_fall", run: run{d: 40 * time.Minute,
			temp: ripple(90, 0.4), power: ripple(92, 3),
			clock: func(m float64) float64 { return 2.45 - 0.45*math.Min(1, math.Max(0, (m-20)/5)) }}},
		{name: "the driver's counters at 25%", onset: 20, evidence: "thermal_slowdown_counters", run: run{d: 40 * time.Minute,
			temp: ripple(80, 0.4), power: ripple(92, 3), clock: constant(2.4),
			slowdown: func(m float64) float64 { return 0.25 * 60 * math.Max(0, m-20) }}},
		// A boost at 140 W, then the ~100 W cap at a lower clock while
		// hot: the cap took that clock, not heat.
		{name: "boost at 140 W, then the cap at 100 W and a lower clock", never: true, clockHolding: true, run: run{d: 40 * time.Minute,
			temp: ripple(89, 0.4),
			power: func(m float64) float64 {
				if m < 10 {
					return 140
				}
				return 100
			},
			clock: func(m float64) float64 {
				if m < 10 {
					return 2.7
				}
				return 2.4
			}}},
		// On a GB10 the clock follows power: 2.47 GHz at 65 W, 2.25 GHz
		// at 95 W (djangodevreng/dgx-spark-benchmarks), warm at 82 °C.
		// Power rising takes the clock: never a fall.
		{name: "clock following power as it ramps 65 → 95 W, warm", never: true, run: run{d: 40 * time.Minute,
			temp:  ripple(82, 0.5),
			power: func(m float64) float64 { return 65 + 30*math.Min(1, math.Max(0, (m-15)/5)) },
			clock: func(m float64) float64 { return 2.47 - 0.22*math.Min(1, math.Max(0, (m-15)/5)) }}},
		// A slow soak: 0.2 °C/min, under the climbing slope, never hot
		// on average; the clock lost at the same power while warm.
		{name: "slow soak 82 → 88 °C, clock 2.45 → 2.15 GHz at a flat 88 W", onset: 18, evidence: "clock_fall", run: run{d: 40 * time.Minute,
			temp: func(m float64) float64 { return 82 + 6*m/40 }, power: ripple(88, 2),
			clock: func(m float64) float64 { return 2.45 - 0.30*math.Min(1, math.Max(0, (m-10)/20)) }}},
		// The guide's three columns: no clock, no utilisation. The
		// signature alone is all there is, and it is named so.
		{name: "climb at flat power, clocks not logged", onset: 0, evidence: "signature_only", run: run{d: 30 * time.Minute,
			temp: func(m float64) float64 { return 70 + m }, power: ripple(100, 3), clock: constant(math.NaN()), withoutUtilization: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			steps, res := replaySteps(tc.run.samples(), cfg)
			first, holding := -1, false
			for i, st := range steps {
				holding = holding || st.Verdict.State == Watching && st.Verdict.ClockHolding
				if st.Verdict.State == Throttled && first < 0 {
					first = i
				}
			}
			if tc.clockHolding && !holding {
				t.Errorf("never watching with the clock holding")
			}
			if tc.never {
				if first >= 0 {
					v := steps[first].Verdict
					t.Errorf("throttled at %v: evidence %q, clock %.0f of %.0f MHz, share %.4f",
						steps[first].Time.Sub(t0), v.Evidence(), v.Clock.Recent/1e6, v.Clock.Level/1e6, v.SlowdownShare)
				}
				return
			}
			if first < 0 {
				t.Fatalf("never throttled")
			}
			at := steps[first].Time.Sub(t0)
			onset := time.Duration(tc.onset * float64(time.Minute))
			if at < onset || at > onset+cfg.Window+2*cfg.Interval {
				t.Errorf("throttled at %v; want within a window of %v", at, onset)
			}
			if got := steps[first].Verdict.Evidence(); got != tc.evidence {
				t.Errorf("evidence %q, want %q", got, tc.evidence)
			}
			if len(res.Episodes) != 1 || !res.Episodes[0].Open {
				t.Errorf("episodes %+v, want one, open to the end", res.Episodes)
			}
		})
	}
}

// A fall of 9% is the clock floating; of 11%, lost.
func TestClockFellThreshold(t *testing.T) {
	for _, tc := range []struct {
		to   float64
		fell bool
	}{{2.45 * 0.91, false}, {2.45 * 0.89, true}} {
		r := run{d: 20 * time.Minute, temp: constant(90), power: constant(95),
			clock: func(m float64) float64 {
				if m < 15 {
					return 2.45
				}
				return tc.to
			}}
		samples := r.samples()
		v := analyzeThermal(samples, samples[len(samples)-1].Time, Normal, DefaultThermalConfig())
		if v.ClockFell != tc.fell || v.Clock.Level != 2.45e9 || math.Abs(v.Clock.Recent-tc.to*1e9) > 1 {
			t.Errorf("clock to %.3f GHz: fell %v (level %.0f, recent %.0f), want %v", tc.to, v.ClockFell, v.Clock.Level, v.Clock.Recent, tc.fell)
		}
	}
}

// The driver's margin decides "hot" where the samples carry it: 80 °C
// with 5 °C left is hot, 90 °C with 10 °C left is not.
func TestHotByMargin(t *testing.T) {
	for _, tc := range []struct {
		temp, margin float64
		hot          bool
	}{{80, 5, true}, {90, 10, false}, {88, 6, true}} {
		r := run{d: 12 * time.Minute, temp: constant(tc.temp), power: constant(95), clock: constant(2.45), margin: constant(tc.margin)}
		samples := r.samples()
		v := analyzeThermal(samples, samples[len(samples)-1].Time, Normal, DefaultThermalConfig())
		if v.Hot != tc.hot || !v.HasMargin || v.MarginMean != tc.margin {
			t.Errorf("%.0f °C, margin %.0f: hot %v (margin %v %.1f), want %v", tc.temp, tc.margin, v.Hot, v.HasMargin, v.MarginMean, tc.hot)
		}
		if want := map[bool]ThermalState{true: Watching, false: Normal}[tc.hot]; v.State != want {
			t.Errorf("%.0f °C, margin %.0f: state %s, want %s (steady clock)", tc.temp, tc.margin, v.State, want)
		}
	}
}

// The level a slow fall is measured against is where the clock ran at
// comparable power earlier in the run, however long ago: not only in the
// samples held (twice the window), not only at the power the best level
// had, and through the idle dips of serving. Each run is warm (82–87 °C),
// its power flat, and its clock falls 6–8 MHz a minute, so no 20 minutes
// of it lose 10 %.
func TestClockLevelOutlivesTheSamplesHeld(t *testing.T) {
	cfg := DefaultThermalConfig()
	warm := func(m float64) float64 { return 82 + 5*m/65 }
	for _, tc := range []struct {
		name   string
		run    run
		at     float64 // minutes
		level  float64 // GHz, the level at
		onset  float64 // minutes: throttled from within two minutes after
		before bool    // …and not before
	}{
		// 5 minutes at 83 W and 2.44 GHz, a 3-minute ramp to 87.5 W and
		// 2.42 GHz, the soak, power nudged to 89 W at 40 minutes: the
		// 83 W level is no longer comparable, the ramp's at 84 W is
		// (2.435 GHz), though it left the samples held 20 minutes
		// before. 10 % down from 46 minutes.
		{name: "power nudged up late in a slow soak", at: 50, level: 2.435, onset: 46, run: run{d: 65 * time.Minute, temp: warm,
			power: func(m float64) float64 {
				return 83 + 4.5*math.Min(1, math.Max(0, (m-5)/3)) + 1.5*math.Min(1, math.Max(0, (m-40)/2))
			},
			clock: func(m float64) float64 {
				if m < 8 {
					return 2.44 - 0.02*math.Max(0, (m-5)/3)
				}
				return 2.42 - 0.006*(m-8)
			}}},
		// Serving at 87.5 W and 2.46 GHz, idle for 30 s every 5 minutes
		// and once more as the soak begins at 20 minutes: 2.46 GHz is
		// where it ran at that power, 10 % down from 47.7 minutes.
		{name: "idle dips before the soak", at: 50, level: 2.46, onset: 47.7, run: run{d: 55 * time.Minute, temp: warm,
			power: func(m float64) float64 {
				if math.Mod(m, 5) >= 4.5 && m < 20 {
					return 15
				}
				return 87.5
			},
			util: func(m float64) float64 {
				if math.Mod(m, 5) >= 4.5 && m < 20 {
					return 0
				}
				return 0.97
			},
			clock: func(m float64) float64 {
				if m < 20 {
					return 2.46
				}
				return 2.44 - 0.008*(m-20)
			}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			steps, res := replaySteps(tc.run.samples(), cfg)
			first := -1
			for i, st := range steps {
				if st.Verdict.State == Throttled && first < 0 {
					first = i
				}
				if d := st.Time.Sub(t0); d == time.Duration(tc.at*float64(time.Minute)) {
					if c := st.Verdict.Clock; !c.HasLevel || math.Abs(c.Level-tc.level*1e9) > 10e6 {
						t.Errorf("at %v the level is %.0f MHz at %.1f W (recent %.0f MHz at %.1f W), want %.0f MHz",
							d, c.Level/1e6, c.LevelPower, c.Recent/1e6, c.RecentPower, tc.level*1e3)
					}
				}
			}
			if first < 0 {
				t.Fatal("never throttled")
			}
			onset := time.Duration(tc.onset * float64(time.Minute))
			if at := steps[first].Time.Sub(t0); at < onset || at > onset+2*time.Minute {
				t.Errorf("throttled from %v; its clock is 10 %% down from %v", at, onset)
			}
			if got := steps[first].Verdict.Evidence(); got != "clock_fall" || len(res.Episodes) != 1 || !res.Episodes[0].Open {
				t.Errorf("evidence %q, episodes %+v; want clock_fall, one, to the end", got, res.Episodes)
			}
		})
	}
}

// The real GB10 runs committed in testdata/reallogs, replayed as their 10 s
// samples: no fall at comparable power while at 75 °C or more beyond the
// 8.0 % docs/thermal.md reports for the largest of 417 runs, however long
// the level is kept.
func TestRealGB10RunsFallLessThanTheRule(t *testing.T) {
	cfg := DefaultThermalConfig()
	cfg.Interval = 10 * time.Second
	for _, name := range []string{"gb10-harness-rate-sweep-1h44m.csv", "gb10-harness-power-ramp-28m.csv", "gb10-harness-plateau-25m.csv"} {
		f, err := os.Open(filepath.Join("..", "..", "testdata", "reallogs", name))
		if err != nil {
			t.Fatal(err)
		}
		tr, err := thermallog.Parse(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		var samples []ThermalSample
		for _, r := range tr.Rows {
			if s := rowSample(r); s != nil {
				samples = append(samples, *s)
			}
		}
		steps, _ := replaySteps(samples, cfg)
		worst := 0.0
		for _, st := range steps {
			if c := st.Verdict.Clock; c.HasClock && c.HasLevel && c.RecentTemperature >= 75 {
				worst = max(worst, 1-c.Recent/c.Level)
			}
		}
		if len(samples) < 100 || worst > 0.0805 {
			t.Errorf("%s: %d samples, the clock %.1f %% below its level at comparable power while warm", name, len(samples), 100*worst)
		}
	}
}
