package judge

import (
	"math"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// The reason bits are nvml.h's; go-nvml is the reference.
func TestThermalReasonsMatchNVML(t *testing.T) {
	if reasonSWThermalSlowdown != nvml.ClocksEventReasonSwThermalSlowdown {
		t.Errorf("sw thermal slowdown = %#x, nvml says %#x", reasonSWThermalSlowdown, nvml.ClocksEventReasonSwThermalSlowdown)
	}
	if ReasonHWThermalSlowdown != nvml.ClocksThrottleReasonHwThermalSlowdown {
		t.Errorf("hw thermal slowdown = %#x, nvml says %#x", ReasonHWThermalSlowdown, nvml.ClocksThrottleReasonHwThermalSlowdown)
	}
	for _, other := range []uint64{nvml.ClocksEventReasonGpuIdle, nvml.ClocksEventReasonSwPowerCap,
		nvml.ClocksThrottleReasonHwSlowdown, nvml.ClocksThrottleReasonHwPowerBrakeSlowdown} {
		if (ThermalSample{Reasons: &other}).thermalSlowdown() {
			t.Errorf("reason %#x taken for a thermal slowdown", other)
		}
	}
}

// A small window keeps the tables short: one minute of 10 s samples.
func smallConfig() ThermalConfig {
	cfg := DefaultThermalConfig()
	cfg.Window = time.Minute
	cfg.Interval = 10 * time.Second
	return cfg
}

var t0 = time.Date(2025, 11, 24, 14, 0, 0, 0, time.UTC)

func ptr[T any](v T) *T { return &v }

// series builds samples every 10 s from t0, one per temperature; power
// and utilisation cycle through their lists (nil util: not reported).
func series(temps, powers []float64, util *float64) []ThermalSample {
	out := make([]ThermalSample, len(temps))
	for i, temp := range temps {
		out[i] = ThermalSample{Time: t0.Add(time.Duration(i) * 10 * time.Second), Temperature: temp,
			Power: powers[i%len(powers)], Utilization: util}
	}
	return out
}

func flat(v float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// linear is n temperatures from a, rising by step each sample.
func linear(a, step float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = a + step*float64(i)
	}
	return out
}

func TestAnalyzeStates(t *testing.T) {
	busyUtil, idleUtil := ptr(0.97), ptr(0.0)
	end := t0.Add(time.Minute) // seven samples, 0 s to 60 s, cover the window
	for _, tc := range []struct {
		name      string
		samples   []ThermalSample
		now       time.Time
		prev      ThermalState
		want      ThermalState
		signature bool
	}{
		{"no samples", nil, end, Normal, Collecting, false},
		{"window not yet covered", series(linear(70, 1, 3), []float64{100}, busyUtil), t0.Add(20 * time.Second), Normal, Collecting, false},
		{"idle: flat low power, cool", series(flat(38, 7), []float64{4, 4.5}, idleUtil), end, Normal, Normal, false},
		{"idle GPU warming with its room", series(linear(40, 1, 7), []float64{4}, idleUtil), end, Normal, Normal, false},
		{"plateau, temperature climbing", series(linear(70, 1, 7), []float64{100, 103, 98}, busyUtil), end, Normal, Throttled, true},
		{"plateau holding hot", series(flat(90, 7), []float64{100, 103, 98}, busyUtil), end, Normal, Throttled, true},
		{"plateau holding warm", series(flat(80, 7), []float64{100, 103, 98}, busyUtil), end, Normal, Normal, false},
		{"climbing, power swinging", series(linear(60, 1, 7), []float64{60, 100}, busyUtil), end, Normal, Watching, false},
		{"climbing, flat at the rating", series(linear(60, 1, 7), []float64{230}, busyUtil), end, Normal, Watching, false},
		{"busy by power when utilisation is not reported", series(linear(70, 1, 7), []float64{100}, nil), end, Normal, Throttled, true},
		{"idle by power when utilisation is not reported", series(linear(40, 1, 7), []float64{5}, nil), end, Normal, Normal, false},
		// Fast rise then level: a warm-up ending, not a climb.
		{"plateau, warm-up levelling off", series([]float64{60, 66, 70, 72, 73, 73.5, 74}, []float64{100}, busyUtil), end, Normal, Normal, false},
		{"samples after now are ignored", series(linear(70, 1, 9), []float64{100}, busyUtil), t0.Add(30 * time.Second), Normal, Collecting, false},
		// 0.3 °C/min: under the 0.5 threshold, over the 0.25 kept when
		// already throttled.
		{"slow climb, entering", series(linear(70, 0.05, 7), []float64{100}, busyUtil), end, Normal, Normal, false},
		{"slow climb, staying", series(linear(70, 0.05, 7), []float64{100}, busyUtil), end, Throttled, Throttled, true},
		// Hot from 88 °C (healthy GB10 runs hold 84–86 °C), 86 °C when
		// already throttled. No clock in these samples: the signature
		// stands alone.
		{"87 °C, entering", series(flat(87, 7), []float64{100}, busyUtil), end, Normal, Normal, false},
		{"87 °C, staying", series(flat(87, 7), []float64{100}, busyUtil), end, Throttled, Throttled, true},
		{"85 °C, leaving", series(flat(85, 7), []float64{100}, busyUtil), end, Throttled, Normal, false},
		{"spread 25 W, entering", series(flat(90, 7), []float64{100, 75}, busyUtil), end, Normal, Normal, false},
		{"spread 25 W, staying", series(flat(90, 7), []float64{100, 75}, busyUtil), end, Throttled, Throttled, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := analyzeThermal(tc.samples, tc.now, tc.prev, smallConfig())
			if v.State != tc.want || v.Signature != tc.signature {
				t.Errorf("state %s signature %v, want %s %v (busy %v flat %v below %v rising %v climbing %v hot %v)",
					v.State, v.Signature, tc.want, tc.signature, v.Busy, v.Flat, v.BelowNominal, v.Rising, v.Climbing, v.Hot)
			}
		})
	}
}

func TestAnalyzeGaps(t *testing.T) {
	cfg := smallConfig() // gap: more than 30 s
	busyUtil := ptr(0.97)
	samples := series(linear(70, 1, 7), []float64{100}, busyUtil)
	// Remove 10 s to 40 s: a 40 s hole inside the window.
	holed := append(append([]ThermalSample{}, samples[:1]...), samples[5:]...)
	v := analyzeThermal(holed, t0.Add(time.Minute), Normal, cfg)
	if v.State != Collecting || v.Covered || v.Samples != 2 {
		t.Errorf("window with a 40 s hole: state %s covered %v samples %d, want collecting on the 2 samples after the hole",
			v.State, v.Covered, v.Samples)
	}
	// A 30 s hole is within the tolerance.
	tolerated := append(append([]ThermalSample{}, samples[:2]...), samples[4:]...)
	if v := analyzeThermal(tolerated, t0.Add(time.Minute), Normal, cfg); v.State != Throttled || !v.Covered {
		t.Errorf("window with a 30 s hole: state %s covered %v, want throttled and covered", v.State, v.Covered)
	}
	// Nothing for 40 s: the window is stale, nothing is reported from it.
	v = analyzeThermal(samples, t0.Add(100*time.Second), Throttled, cfg)
	if v.State != Collecting || v.Stats != nil || v.Latest != nil {
		t.Errorf("stale window: state %s stats %v latest %v, want collecting with neither", v.State, v.Stats, v.Latest)
	}
}

func TestAnalyzeThermalSlowdown(t *testing.T) {
	cfg := smallConfig()
	samples := series(flat(70, 3), []float64{60, 100}, ptr(0.97))
	samples[1].Reasons = ptr(reasonSWThermalSlowdown)
	samples[2].Reasons = ptr(ReasonHWThermalSlowdown | 0x4)
	now := t0.Add(20 * time.Second)
	v := analyzeThermal(samples, now, Normal, cfg)
	if v.State != Throttled || !v.ThermalSlowdown || v.Signature || v.SlowdownFor != 10*time.Second {
		t.Errorf("state %s slowdown %v for %v signature %v; want throttled by NVML's reasons for 10s, without the signature",
			v.State, v.ThermalSlowdown, v.SlowdownFor, v.Signature)
	}
	samples[2].Reasons = ptr(uint64(0x4)) // power cap only
	if v := analyzeThermal(samples, now, Throttled, cfg); v.State != Collecting || v.ThermalSlowdown {
		t.Errorf("after the reasons cleared: state %s slowdown %v, want collecting", v.State, v.ThermalSlowdown)
	}
}

func TestAnalyzeStats(t *testing.T) {
	cfg := smallConfig()
	// (0 s, 0 °C), (10 s, 1 °C), (20 s, 5 °C): slope = Σ(t−10)(y−2)/Σ(t−10)²
	// = (20 + 0 + 30)/200 = 0.25 °C/s.
	samples := series([]float64{0, 1, 5}, []float64{10, 40, 16}, nil)
	v := analyzeThermal(samples, t0.Add(20*time.Second), Normal, cfg)
	st := v.Stats
	if st == nil {
		t.Fatal("no stats")
	}
	if math.Abs(st.Slope-0.25) > 1e-12 || !st.HasSlope {
		t.Errorf("slope %v, want 0.25", st.Slope)
	}
	if st.PowerMean != 22 || st.PowerSpread != 30 || st.PowerMax != 40 || st.TemperatureMean != 2 {
		t.Errorf("power mean %v spread %v max %v, temperature mean %v; want 22 30 40 2",
			st.PowerMean, st.PowerSpread, st.PowerMax, st.TemperatureMean)
	}
	if v.Samples != 3 || v.Span != 20*time.Second || v.Latest.Temperature != 5 {
		t.Errorf("samples %d span %v latest %v", v.Samples, v.Span, v.Latest)
	}

	one := analyzeThermal(samples[:1], t0, Normal, cfg)
	if one.Stats.HasSlope || one.Stats.PowerSpread != 0 {
		t.Errorf("one sample: has slope %v, spread %v", one.Stats.HasSlope, one.Stats.PowerSpread)
	}
}

// A covered window analyses the samples in the window only, not the older
// ones kept in the ring.
func TestAnalyzeUsesTheWindowOnly(t *testing.T) {
	cfg := smallConfig()
	samples := series(append(flat(40, 5), flat(90, 7)...), append(flat(5, 5), flat(100, 7)...), nil)
	v := analyzeThermal(samples, samples[len(samples)-1].Time, Normal, cfg)
	if v.Samples != 7 || v.Stats.PowerSpread != 0 || v.State != Throttled {
		t.Errorf("samples %d spread %v state %s; want the last 7 samples, flat and hot", v.Samples, v.Stats.PowerSpread, v.State)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultThermalConfig().Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	for name, change := range map[string]func(*ThermalConfig){
		"zero interval":       func(c *ThermalConfig) { c.Interval = 0 },
		"window of 2 samples": func(c *ThermalConfig) { c.Window = 2 * c.Interval },
		"window too long":     func(c *ThermalConfig) { c.Interval = time.Millisecond; c.Window = 24 * time.Hour },
		"zero nominal power":  func(c *ThermalConfig) { c.NominalPower = 0 },
		"NaN nominal power":   func(c *ThermalConfig) { c.NominalPower = math.NaN() },
		"ratio over 1":        func(c *ThermalConfig) { c.BelowNominalRatio = 1.5 },
		"negative spread":     func(c *ThermalConfig) { c.FlatSpread = -1 },
		"utilisation over 1":  func(c *ThermalConfig) { c.BusyUtilization = 2 },
		"negative busy power": func(c *ThermalConfig) { c.BusyPower = -1 },
		"infinite slope":      func(c *ThermalConfig) { c.ClimbingSlope = math.Inf(1) },
		"NaN hot temperature": func(c *ThermalConfig) { c.HotTemperature = math.NaN() },
	} {
		cfg := DefaultThermalConfig()
		change(&cfg)
		if cfg.Validate() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func BenchmarkAnalyzeDefaultWindow(b *testing.B) {
	cfg := DefaultThermalConfig()
	n := int(cfg.Window / cfg.Interval)
	samples := make([]ThermalSample, n+1)
	for i := range samples {
		samples[i] = ThermalSample{Time: t0.Add(time.Duration(i) * cfg.Interval), Temperature: 70 + float64(i)/60, Power: 100,
			SMClock: ptr(2.45e9 - float64(i%7)*1e7)}
	}
	now := samples[n].Time
	b.ReportAllocs()
	for b.Loop() {
		analyzeThermal(samples, now, Normal, cfg)
	}
}

// withCounters sets each sample's thermal slowdown and power cap counters
// (nil entries: not reported).
func withCounters(samples []ThermalSample, slowdown, powerCap []*float64) []ThermalSample {
	for i := range samples {
		samples[i].ThermalSlowdownSeconds = slowdown[i]
		samples[i].PowerCapSeconds = powerCap[i]
	}
	return samples
}

func counters(vs ...float64) []*float64 {
	out := make([]*float64, len(vs))
	for i := range vs {
		out[i] = ptr(vs[i])
	}
	return out
}

// GB10's default: every flag clear, the thermal slowdown counters growing.
// That growth is direct evidence, window or not; the SW power cap counter
// growing alone (the ~100 W platform cap) never is.
func TestCounterEvidence(t *testing.T) {
	cfg := smallConfig()
	cool := flat(60, 8) // no signature: temperature flat and cool
	busy := ptr(0.97)
	for _, tc := range []struct {
		name            string
		slowdown, cap   []*float64
		want            ThermalState
		counterSlowdown bool
		slowdownSeconds float64
		powerCapSeconds float64
	}{
		{"thermal counters grow, flags clear", counters(0, 0, 0, 0, 0, 2, 4.5, 7), counters(0, 10, 20, 30, 40, 50, 60, 70),
			Throttled, true, 7, 60},
		// The window is the latest minute: the first sample has left it.
		{"only the power cap counter grows", counters(1, 1, 1, 1, 1, 1, 1, 1), counters(0, 10, 20, 30, 40, 50, 60, 70),
			Normal, false, 0, 60},
		// Growth over the recent span (30 s here) counts when it is at
		// least 5% of it; growth before the span no longer does.
		{"growth within the recent span", counters(0, 0, 0, 0, 0, 3, 3, 3), counters(0, 0, 0, 0, 0, 0, 0, 0),
			Throttled, true, 3, 0},
		{"growth before the recent span", counters(0, 0, 3, 3, 3, 3, 3, 3), counters(0, 0, 0, 0, 0, 0, 0, 0),
			Normal, false, 3, 0},
		// A few milliseconds at a temperature peak: a blip, not
		// throttling (SparkGPUThrottling's share is 5%).
		{"a blip of milliseconds", counters(0, 0, 0, 0, 0, 0.004, 0.004, 0.006), counters(0, 0, 0, 0, 0, 0, 0, 0),
			Normal, false, 0.006, 0},
		{"1 s in 30 s: 3%", counters(0, 0, 0, 0, 0, 0.5, 1, 1), counters(0, 0, 0, 0, 0, 0, 0, 0),
			Normal, false, 1, 0},
		// A driver reload resets the counter: it counts from zero again.
		{"counter reset", counters(50, 50, 50, 50, 50, 50, 0, 2), counters(0, 0, 0, 0, 0, 0, 0, 0),
			Throttled, true, 2, 0},
		{"no counters", make([]*float64, 8), make([]*float64, 8), Normal, false, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			samples := withCounters(series(cool, []float64{100}, busy), tc.slowdown, tc.cap)
			v := analyzeThermal(samples, samples[len(samples)-1].Time, Normal, cfg)
			if v.State != tc.want || v.CounterSlowdown != tc.counterSlowdown || v.Signature || v.ThermalSlowdown {
				t.Errorf("state %s, counter slowdown %v (signature %v, flags %v); want %s, %v",
					v.State, v.CounterSlowdown, v.Signature, v.ThermalSlowdown, tc.want, tc.counterSlowdown)
			}
			if math.Abs(v.SlowdownSeconds-tc.slowdownSeconds) > 1e-9 || math.Abs(v.PowerCapSeconds-tc.powerCapSeconds) > 1e-9 {
				t.Errorf("window seconds: slowdown %v, power cap %v; want %v, %v",
					v.SlowdownSeconds, v.PowerCapSeconds, tc.slowdownSeconds, tc.powerCapSeconds)
			}
			if has := tc.slowdown[0] != nil; v.HasCounters != has || v.HasPowerCap != has {
				t.Errorf("has counters %v, has power cap %v; want %v", v.HasCounters, v.HasPowerCap, has)
			}
			wantEvidence := ""
			if tc.counterSlowdown {
				wantEvidence = "thermal_slowdown_counters"
			}
			if v.Evidence() != wantEvidence {
				t.Errorf("evidence %q, want %q", v.Evidence(), wantEvidence)
			}
		})
	}
}

// Counter growth needs no full window, as the flags do not: two samples
// are enough, their growth taken over at least the recent span (2 s of
// 30 s).
func TestCounterEvidenceBeforeTheWindowIsFull(t *testing.T) {
	samples := withCounters(series(flat(50, 2), []float64{30}, ptr(0.4)), counters(10, 12), counters(0, 0))
	v := analyzeThermal(samples, samples[1].Time, Collecting, smallConfig())
	if v.Covered || v.State != Throttled || !v.CounterSlowdown {
		t.Errorf("covered %v, state %s, counter slowdown %v; want throttled before the window is covered", v.Covered, v.State, v.CounterSlowdown)
	}
}

func TestEvidenceNamesEveryPart(t *testing.T) {
	v := ThermalVerdict{Signature: true, ClockFell: true, ThermalSlowdown: true, CounterSlowdown: true}
	if got := v.Evidence(); got != "signature+clock_fall+nvml_thermal_slowdown+thermal_slowdown_counters" {
		t.Errorf("evidence %q", got)
	}
	if got := (ThermalVerdict{Signature: true, SignatureOnly: true}).Evidence(); got != "signature_only" {
		t.Errorf("evidence without a clock %q", got)
	}
	// A signature with the clock holding is no evidence.
	if got := (ThermalVerdict{Signature: true, ClockHolding: true, CounterSlowdown: true}).Evidence(); got != "thermal_slowdown_counters" {
		t.Errorf("evidence with the clock holding %q", got)
	}
}
