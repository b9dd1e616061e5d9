package judge

import (
	"cmp"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/thermallog"
)

func TestWindowKeepsTheLatestInOrder(t *testing.T) {
	for _, exact := range []bool{true, false} {
		testWindowKeepsTheLatestInOrder(t, exact)
	}
}

func testWindowKeepsTheLatestInOrder(t *testing.T, exact bool) {
	w := newThermalWindow(smallConfig(), 3, exact)
	for i := range 5 {
		if err := w.add(ThermalSample{Time: t0.Add(time.Duration(i) * time.Second), Temperature: float64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	got := w.samples()
	if len(got) != 3 || len(w.buf)-w.lo != 3 {
		t.Fatalf("holds %d samples, want 3", len(got))
	}
	for i, s := range got {
		if s.Temperature != float64(i+2) {
			t.Errorf("sample %d is %v, want %d", i, s.Temperature, i+2)
		}
	}
	if err := w.add(ThermalSample{Time: t0.Add(4 * time.Second)}); err == nil {
		t.Error("a sample at the newest sample's time was accepted")
	}
	if err := w.add(ThermalSample{Time: t0}); err == nil {
		t.Error("a sample older than the newest was accepted")
	}
}

// The window slides over its buffer and back to the buffer's start: at
// every sample it holds the latest, in order, and a copy taken before
// stays as it was.
func TestWindowSlidesOverItsBuffer(t *testing.T) {
	for _, exact := range []bool{true, false} {
		testWindowSlidesOverItsBuffer(t, exact)
	}
}

func testWindowSlidesOverItsBuffer(t *testing.T, exact bool) {
	w := newThermalWindow(smallConfig(), 3, exact)
	var kept [][]ThermalSample
	for i := range 20 {
		if err := w.add(ThermalSample{Time: t0.Add(time.Duration(i) * time.Second), Temperature: float64(i)}); err != nil {
			t.Fatal(err)
		}
		kept = append(kept, w.samples())
	}
	for i, got := range kept {
		from := max(0, i-2)
		if len(got) != i-from+1 {
			t.Fatalf("after sample %d: %d samples, want %d", i, len(got), i-from+1)
		}
		for j, s := range got {
			if s.Temperature != float64(from+j) {
				t.Errorf("after sample %d: sample %d is %v, want %d", i, j, s.Temperature, from+j)
			}
		}
	}
}

// The window gives, step after step, what the full recomputation it replaced
// gives: exact to the bit, and in the states, flags and exact figures without
// exact. Logs real and random, the random ones with figures at the thresholds.
func TestWindowAsAFullRecomputation(t *testing.T) {
	for _, path := range realLogs(t) {
		samples, interval := logSamples(t, path)
		if len(samples) == 0 {
			continue // a log the report refuses, or one without temperature and power
		}
		cfg := DefaultThermalConfig()
		cfg.Interval = interval
		if cfg.Validate() != nil {
			continue
		}
		compareWithFull(t, filepath.Base(path), cfg, samples, 0)
	}
	for seed := range uint64(12) {
		r := rand.New(rand.NewPCG(seed, 45))
		cfg := DefaultThermalConfig()
		cfg.Interval = []time.Duration{time.Second, 5 * time.Second, 10 * time.Second}[seed%3]
		cfg.Window = []time.Duration{time.Minute, 10 * time.Minute, 2 * time.Minute}[seed/3%3]
		if cfg.Validate() != nil {
			continue
		}
		compareWithFull(t, "random", cfg, randomSamples(r, cfg, 1200), seed)
		if seed%3 == 0 {
			compareWithFull(t, "at the slopes", cfg, atTheSlopes(cfg), seed)
		}
	}
}

// atTheSlopes climbs at exactly the climbing slope for two windows, then at
// half of it, its slowdown counter growing at exactly the slowdown share.
func atTheSlopes(cfg ThermalConfig) []ThermalSample {
	n := int(4 * cfg.Window / cfg.Interval)
	out := make([]ThermalSample, n)
	for i := range out {
		at := time.Duration(i) * cfg.Interval
		temp := 70 + cfg.ClimbingSlope*at.Seconds()
		if i >= n/2 {
			temp = 70 + cfg.ClimbingSlope/2*(at-time.Duration(n/2)*cfg.Interval).Seconds()
		}
		out[i] = ThermalSample{Time: t0.Add(at), Temperature: temp, Power: 100, Utilization: ptr(0.97),
			ThermalSlowdownSeconds: ptr(ThermalSlowdownShare * at.Seconds()), SMClock: ptr(2.4e9)}
	}
	return out
}

// Figures no reading has (NaN, infinities, 1e300) are judged as the full
// recomputation judges them, with or without exact figures.
func TestWindowOddFigures(t *testing.T) {
	cfg := smallConfig()
	odd := []float64{math.NaN(), math.Inf(1), math.Inf(-1), 1e300, -1e300, 3e13}
	r := rand.New(rand.NewPCG(7, 45))
	samples := randomSamples(r, cfg, 600)
	for i := range samples {
		if r.IntN(20) != 0 {
			continue
		}
		x := odd[r.IntN(len(odd))]
		switch s := &samples[i]; r.IntN(5) {
		case 0:
			s.Power = x
		case 1:
			s.Temperature = x
		case 2:
			s.Utilization = ptr(x)
		case 3:
			s.TemperatureMargin = ptr(x)
		default:
			s.ThermalSlowdownSeconds = ptr(x)
		}
	}
	old := &full{cfg: cfg, verdict: ThermalVerdict{State: Collecting}}
	exact, fast := newThermalWindow(cfg, cfg.capacity(), true), newThermalWindow(cfg, cfg.capacity(), false)
	vExact, vFast := old.verdict, old.verdict
	for _, s := range samples {
		old.add(s)
		_, _ = exact.add(s), fast.add(s)
		old.verdict = oldAnalyzeThermalAfter(old.held, s.Time, old.verdict, cfg)
		vExact, vFast = exact.analyze(s.Time, vExact), fast.analyze(s.Time, vFast)
		want := old.verdict.State + ThermalState(old.verdict.Evidence())
		for name, v := range map[string]ThermalVerdict{"exact": vExact, "fast": vFast} {
			if got := v.State + ThermalState(v.Evidence()); got != want || v.Samples != old.verdict.Samples {
				t.Fatalf("%s window at %v: %s over %d samples, want %s over %d", name, s.Time, got, v.Samples, want, old.verdict.Samples)
			}
		}
	}
}

func realLogs(t *testing.T) []string {
	var paths []string
	for _, dir := range []string{"thermal", "reallogs"} {
		p, err := filepath.Glob(filepath.Join("..", "..", "testdata", dir, "*.csv"))
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p...)
	}
	if len(paths) < 30 {
		t.Fatalf("%d logs in testdata", len(paths))
	}
	return paths
}

func logSamples(t *testing.T, path string) ([]ThermalSample, time.Duration) {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr, err := thermallog.ParseOptions(f, thermallog.Options{Location: time.UTC, Interval: time.Second})
	if err != nil {
		return nil, 0
	}
	var out []ThermalSample
	var gaps []time.Duration
	for _, r := range tr.Rows {
		s := rowSample(r)
		if s == nil || r.GPU != nil && *r.GPU != 0 {
			continue
		}
		if n := len(out); n > 0 {
			gaps = append(gaps, r.Time.Sub(out[n-1].Time))
		}
		out = append(out, *s)
	}
	interval := 5 * time.Second
	if len(gaps) > 0 {
		slices.Sort(gaps)
		interval = max(gaps[len(gaps)/2], time.Millisecond)
	}
	return out, interval
}

// randomSamples wander between regimes; some hold a figure exactly at a
// threshold, or a hundredth off it, where rounding decides.
func randomSamples(r *rand.Rand, cfg ThermalConfig, n int) []ThermalSample {
	out := make([]ThermalSample, 0, n)
	at, rampFrom := t0, t0
	temp, power, clock, counter, capSecs := 70.0, 100.0, 2.4e9, 10.0, 5.0
	regime, rate := 0, cfg.ClimbingSlope
	for range n {
		if r.IntN(60) == 0 {
			regime, rampFrom, rate = r.IntN(8), at, cfg.ClimbingSlope*float64(1+r.IntN(2))
		}
		at = at.Add(cfg.Interval)
		if regime < 6 {
			at = at.Add(time.Duration(r.NormFloat64() * float64(cfg.Interval) / 50))
		}
		if r.IntN(150) == 0 {
			at = at.Add(time.Duration(r.IntN(5)+1) * cfg.MaxGap())
		}
		s := ThermalSample{Time: at}
		randomRegime(r, regime, &s, &temp, &power, &clock)
		s.Temperature, s.Power = math.Round(temp*100)/100, math.Round(power*1000)/1000
		if regime >= 6 {
			// A climb at exactly the climbing slope, then at half of it; the
			// counter grows at exactly the slowdown share.
			if at.Sub(rampFrom) > cfg.Window {
				rate, rampFrom, temp = cfg.ClimbingSlope/2, at, s.Temperature
			}
			s.Temperature = temp + rate*at.Sub(rampFrom).Seconds()
			counter += ThermalSlowdownShare * cfg.Interval.Seconds() / float64(regime-5)
		}
		if r.IntN(500) == 0 {
			s.Power = 3e13 // beyond the sums' reach: recomputed in full
		}
		if r.IntN(40) == 0 {
			clock = 2.4e9 + r.NormFloat64()*5e7
		}
		if r.IntN(8) != 0 {
			s.SMClock = ptr(math.Round(clock/1e6) * 1e6)
		}
		if regime >= 6 || r.IntN(10) != 0 {
			counter += r.Float64() * cfg.Interval.Seconds() * float64(regime%2) * float64(max(0, 6-regime))
			if r.IntN(300) == 0 {
				counter = 0
			}
			s.ThermalSlowdownSeconds = ptr(counter)
		}
		if r.IntN(2) == 0 {
			capSecs += r.Float64()
			s.PowerCapSeconds = ptr(capSecs)
		}
		out = append(out, s)
	}
	return out
}

func randomRegime(r *rand.Rand, regime int, s *ThermalSample, temp, power, clock *float64) {
	switch regime {
	case 0: // busy and climbing, noisy
		*temp += 0.1 + r.NormFloat64()*0.3
		*power = 100 + r.NormFloat64()*2
		s.Utilization = ptr(0.9 + r.Float64()/10)
	case 1: // at the thresholds
		*temp = []float64{88, 86, 87.99, 88.01, 80, 78}[r.IntN(6)]
		*power = []float64{20, 19.99, 100, 120, 120.01}[r.IntN(5)]
		s.Utilization = ptr([]float64{0.5, 0.49, 0.51}[r.IntN(3)])
	case 2: // idle, no utilisation reported
		*temp, *power = 40+r.Float64(), 4+r.Float64()
	case 3: // decimals that sum inexactly
		*temp, *power = 87.9+float64(r.IntN(3))*0.1, 19.9+float64(r.IntN(3))*0.1
		s.Utilization = ptr(float64(r.IntN(3)) * 0.5)
	case 4: // hot, clock falling, margins, NVML's reasons
		*temp = 90 + r.NormFloat64()
		*power = 99 + r.Float64()*3
		*clock *= 0.995
		s.TemperatureMargin = ptr(float64(r.IntN(9)))
		s.Utilization = ptr(0.97)
		if r.IntN(3) == 0 {
			s.Reasons = ptr(reasonSWThermalSlowdown)
		}
	default: // a plateau at a constant
		*temp, *power = 88, 100
		s.Utilization = ptr(0.97)
	}
}

// full is the window as it was: a slice judged in full at each step.
type full struct {
	cfg     ThermalConfig
	held    []ThermalSample
	verdict ThermalVerdict
}

func (f *full) add(s ThermalSample) {
	if n := len(f.held); n > 0 && !s.Time.After(f.held[n-1].Time) {
		return
	}
	if len(f.held) == max(f.cfg.capacity(), 2) {
		f.held = f.held[1:]
	}
	f.held = append(f.held, s)
}

func compareWithFull(t *testing.T, name string, cfg ThermalConfig, samples []ThermalSample, seed uint64) {
	t.Helper()
	old := &full{cfg: cfg, verdict: ThermalVerdict{State: Collecting}}
	exact, fast := newThermalWindow(cfg, cfg.capacity(), true), newThermalWindow(cfg, cfg.capacity(), false)
	vExact, vFast := old.verdict, old.verdict
	r := rand.New(rand.NewPCG(seed, 1))
	judged := 0
	step := func(now time.Time) bool {
		old.verdict = oldAnalyzeThermalAfter(old.held, now, old.verdict, cfg)
		vExact, vFast = exact.analyze(now, vExact), fast.analyze(now, vFast)
		if old.verdict.State != Collecting {
			judged++
		}
		if !reflect.DeepEqual(old.verdict, vExact) {
			t.Errorf("%s (seed %d) at %v: exact window\n%+v\nfull recomputation\n%+v", name, seed, now, vExact, old.verdict)
			return false
		}
		if diff := withinRounding(old.verdict, vFast); diff != "" {
			t.Errorf("%s (seed %d) at %v: window %s", name, seed, now, diff)
			return false
		}
		if e := outOfBounds(fast, now, r); e != "" {
			t.Errorf("%s (seed %d) at %v: %s", name, seed, now, e)
			return false
		}
		return true
	}
	for i, s := range samples {
		old.add(s)
		_, _ = exact.add(s), fast.add(s)
		now := s.Time
		if i+1 < len(samples) && r.IntN(4) == 0 {
			// Between samples, as the replay's empty steps are.
			now = now.Add(time.Duration(r.Int64N(int64(samples[i+1].Time.Sub(now)))))
			if !step(s.Time) {
				return
			}
		}
		if !step(now) {
			return
		}
	}
	if judged == 0 && len(samples) > 100 {
		t.Errorf("%s: no step judged", name)
	}
}

// outOfBounds: every estimate, over the step's ranges and a random one, is
// within its bound of the full recomputation.
func outOfBounds(w *thermalWindow, now time.Time, r *rand.Rand) string {
	st, ok := w.view(now, ThermalVerdict{})
	if !ok || st.exact {
		return ""
	}
	f := w.figures(&st)
	a := st.run + r.IntN(st.end-st.run)
	b := a + 1 + r.IntN(st.end-a)
	power, temp := w.blockMeans(a, b, false)
	for name, e := range map[string]estimate{"power": f.powerMean, "temperature": f.tempMean, "utilization": f.util,
		"margin": f.margin, "slope": f.slope, "early slope": f.early, "recent slope": f.recent,
		"slowdown": f.slowdown, "power cap": f.powerCap, "share": f.share,
		"block power": power, "block temperature": temp, "random slope": w.estimate(slopeFigure, a, b, false),
		"random growth": w.estimate(slowdownFigure, a, b, false)} {
		if e.err == 0 {
			continue
		}
		if v, _ := w.full(&e); !(math.Abs(v-e.v) <= e.err) {
			return name + " " + ftoa(e.v) + " ± " + ftoa(e.err) + ", the full recomputation " + ftoa(v)
		}
	}
	return ""
}

// withinRounding: the fast window's states, flags and exact figures are the
// full recomputation's; its sums within rounding.
func withinRounding(want, got ThermalVerdict) string {
	if (want.Stats == nil) != (got.Stats == nil) {
		return "stats differ"
	}
	pairs := [][2]*float64{{&want.SlowdownSeconds, &got.SlowdownSeconds}, {&want.PowerCapSeconds, &got.PowerCapSeconds},
		{&want.SlowdownShare, &got.SlowdownShare}, {&want.MarginMean, &got.MarginMean},
		{&want.Clock.LevelPower, &got.Clock.LevelPower}, {&want.Clock.RecentPower, &got.Clock.RecentPower},
		{&want.Clock.RecentTemperature, &got.Clock.RecentTemperature}}
	if want.Stats != nil {
		w, g := *want.Stats, *got.Stats
		want.Stats, got.Stats = &w, &g
		pairs = append(pairs, [2]*float64{&w.PowerMean, &g.PowerMean}, [2]*float64{&w.TemperatureMean, &g.TemperatureMean},
			[2]*float64{&w.Slope, &g.Slope}, [2]*float64{&w.EarlySlope, &g.EarlySlope}, [2]*float64{&w.RecentSlope, &g.RecentSlope})
	}
	for _, p := range pairs {
		if math.Abs(*p[0]-*p[1]) > 1e-9*max(1, math.Abs(*p[0])) {
			return "figure " + ftoa(*p[1]) + ", want " + ftoa(*p[0])
		}
		*p[1] = *p[0]
	}
	if !reflect.DeepEqual(want, got) {
		return "verdict differs"
	}
	return ""
}

func ftoa(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }

// The old computation, kept as the window's reference: every figure over the whole window at each step.

// AnalyzeThermalAfter is analyzeThermal given the whole previous verdict,
// whose clock level carries a busy stretch longer than the samples held.
func oldAnalyzeThermalAfter(samples []ThermalSample, now time.Time, previous ThermalVerdict, cfg ThermalConfig) ThermalVerdict {
	prev := previous.State
	run := oldUnbroken(samples, now, cfg.MaxGap())
	if len(run) == 0 {
		return ThermalVerdict{State: Collecting}
	}
	windowStart := now.Add(-cfg.Window)
	v := ThermalVerdict{Covered: !run[0].Time.After(windowStart)}
	if v.Covered {
		run = oldSince(run, windowStart)
	}
	latest := run[len(run)-1]
	v.Latest = &latest
	v.Samples = len(run)
	v.Span = now.Sub(run[0].Time)
	st := oldStats(run, now.Add(-cfg.Window/2))
	v.Stats = &st

	v.ThermalSlowdown = latest.thermalSlowdown()
	if v.ThermalSlowdown {
		v.SlowdownFor = now.Sub(oldSlowdownStart(run))
	}
	v.SlowdownSeconds, v.HasCounters = oldGrowth(run, func(s ThermalSample) *float64 { return s.ThermalSlowdownSeconds })
	v.PowerCapSeconds, v.HasPowerCap = oldGrowth(run, func(s ThermalSample) *float64 { return s.PowerCapSeconds })

	climbing, hot, flat := cfg.ClimbingSlope, cfg.HotTemperature, cfg.FlatSpread
	if prev == Throttled {
		climbing *= stayClimbingFactor
		hot -= stayHotMargin
		flat *= stayFlatFactor
	}
	v.Busy = oldBusy(run, st, cfg)
	v.Flat = st.PowerSpread <= flat
	v.BelowNominal = st.PowerMax < cfg.BelowNominalRatio*cfg.NominalPower
	v.Rising = oldRises(st, cfg.ClimbingSlope)
	v.Climbing = oldRises(st, climbing) && !oldSettling(st)
	v.Hot = st.TemperatureMean >= hot
	oldHotByMargin(&v, run, prev)
	v.Signature = v.Covered && v.Busy && v.Flat && v.BelowNominal && (v.Climbing || v.Hot)
	oldJudgeClocks(&v, run, samples, now, previous, cfg)

	v.State = stateOf(&v)
	return v
}

func oldUnbroken(samples []ThermalSample, now time.Time, maxGap time.Duration) []ThermalSample {
	end := len(samples)
	for end > 0 && samples[end-1].Time.After(now) {
		end--
	}
	if end == 0 || now.Sub(samples[end-1].Time) > maxGap {
		return nil
	}
	begin := end - 1
	for begin > 0 && samples[begin].Time.Sub(samples[begin-1].Time) <= maxGap {
		begin--
	}
	return samples[begin:end]
}

func oldSince(samples []ThermalSample, t time.Time) []ThermalSample {
	for i, s := range samples {
		if !s.Time.Before(t) {
			return samples[i:]
		}
	}
	return nil
}

func oldStats(run []ThermalSample, recentFrom time.Time) ThermalStats {
	st := ThermalStats{PowerMax: math.Inf(-1)}
	minPower := math.Inf(1)
	for _, s := range run {
		st.PowerMean += s.Power
		st.TemperatureMean += s.Temperature
		st.PowerMax = max(st.PowerMax, s.Power)
		minPower = min(minPower, s.Power)
	}
	st.PowerMean /= float64(len(run))
	st.TemperatureMean /= float64(len(run))
	st.PowerSpread = st.PowerMax - minPower
	st.Slope, st.HasSlope = oldSlope(run)
	recent := oldSince(run, recentFrom)
	st.EarlySlope, st.HasEarlySlope = oldSlope(run[:len(run)-len(recent)])
	st.RecentSlope, st.HasRecentSlope = oldSlope(recent)
	return st
}

// rises requires the latest half to climb too.
func oldRises(st ThermalStats, rate float64) bool {
	return st.HasSlope && st.HasRecentSlope && st.Slope >= rate && st.RecentSlope >= rate
}

func oldSettling(st ThermalStats) bool {
	return st.HasEarlySlope && st.HasRecentSlope && st.RecentSlope < settlingRatio*st.EarlySlope
}

func oldSlope(run []ThermalSample) (float64, bool) {
	if len(run) < 2 {
		return 0, false
	}
	// Times relative to the first sample keep the sums small.
	t0 := run[0].Time
	var meanT, meanY float64
	for _, s := range run {
		meanT += s.Time.Sub(t0).Seconds()
		meanY += s.Temperature
	}
	n := float64(len(run))
	meanT /= n
	meanY /= n
	var sxy, sxx float64
	for _, s := range run {
		dt := s.Time.Sub(t0).Seconds() - meanT
		sxy += dt * (s.Temperature - meanY)
		sxx += dt * dt
	}
	if sxx == 0 {
		return 0, false
	}
	return sxy / sxx, true
}

func oldBusy(run []ThermalSample, st ThermalStats, cfg ThermalConfig) bool {
	var sum float64
	var n int
	for _, s := range run {
		if s.Utilization != nil {
			sum += *s.Utilization
			n++
		}
	}
	if n > 0 {
		return sum/float64(n) >= cfg.BusyUtilization
	}
	return st.PowerMean >= cfg.BusyPower
}

func oldSlowdownStart(run []ThermalSample) time.Time {
	i := len(run) - 1
	for i > 0 && run[i-1].thermalSlowdown() {
		i--
	}
	return run[i].Time
}

// growth adds up a counter's rises. A counter that went down was reset
// (the driver reloaded) and counts from zero, as Prometheus's increase()
// reads it.
func oldGrowth(run []ThermalSample, counter func(ThermalSample) *float64) (total float64, ok bool) {
	var prev *float64
	for _, s := range run {
		c := counter(s)
		if c == nil {
			continue
		}
		if prev != nil {
			ok = true
			if d := *c - *prev; d >= 0 {
				total += d
			} else {
				total += *c
			}
		}
		prev = c
	}
	return total, ok
}

// counterShare spans at least recentSpan, so that one sample's growth right
// after a start is not read as a whole span of slowdown.
func oldCounterShare(run []ThermalSample, now time.Time, cfg ThermalConfig) (share float64, ok bool) {
	span := cfg.recentSpan()
	from := now.Add(-span)
	i := len(run) - 1
	for i > 0 && run[i].Time.After(from) {
		i-- // down to the last sample at or before the span's start
	}
	grew, ok := oldGrowth(run[i:], func(s ThermalSample) *float64 { return s.ThermalSlowdownSeconds })
	if !ok {
		return 0, false
	}
	return grew / max(now.Sub(run[i].Time), span).Seconds(), true
}

// ClockLoss is what the SM clock did over the latest unbroken run of samples,
// clockLoss leaves out blocks at higher power (a warm-up boost above the cap:
// the cap, not heat, took that clock) and at lower power. carried's levels go on while the run does.
func oldClockLoss(samples []ThermalSample, now time.Time, cfg ThermalConfig, carried ClockLoss) ClockLoss {
	run := oldUnbroken(samples, now, cfg.MaxGap())
	if len(run) == 0 {
		return ClockLoss{}
	}
	c := oldContinued(carried, run[0].Time, run[0].Time.Equal(samples[0].Time), now, cfg.Window)
	begin := len(run)
	for begin > 0 && oldBusySample(run[begin-1], cfg) {
		begin--
	}
	stretch := run[begin:]
	if len(stretch) == 0 {
		return c
	}
	c.busyAt = stretch[len(stretch)-1].Time
	span := cfg.recentSpan()
	// clocks is buf, reused by each block and sorted by medianInPlace.
	buf := make([]float64, 0, len(stretch))
	block := func(from int) (next int, clocks []float64, power, temp float64) {
		k := now.Sub(stretch[from].Time) / span
		clocks = buf[:0]
		next = from
		for ; next < len(stretch) && now.Sub(stretch[next].Time)/span == k; next++ {
			power += stretch[next].Power
			temp += stretch[next].Temperature
			if c := stretch[next].SMClock; c != nil {
				clocks = append(clocks, *c)
			}
		}
		n := float64(next - from)
		return next, clocks, power / n, temp / n
	}
	recentFrom := len(stretch)
	for recentFrom > 0 && now.Sub(stretch[recentFrom-1].Time) < span {
		recentFrom--
	}
	if recentFrom == len(stretch) {
		return c
	}
	_, clocks, recentPower, recentTemp := block(recentFrom)
	if len(clocks) == 0 {
		return c
	}
	c.HasClock, c.Recent, c.RecentPower, c.RecentTemperature = true, oldMedianInPlace(clocks), recentPower, recentTemp
	floor, ceiling := recentPower-comparablePowerWatts, recentPower+cfg.FlatSpread
	comparable := func(power, clock float64) {
		if power >= floor && power <= ceiling && (!c.HasLevel || clock > c.Level) {
			c.HasLevel, c.Level, c.LevelPower = true, clock, power
		}
	}
	for _, l := range c.levels {
		comparable(l.power, l.clock)
	}
	levels := oldLevelUpdate{levels: c.levels}
	for i := 0; i < recentFrom; {
		var power float64
		i, clocks, power, _ = block(i)
		if len(clocks) > 0 {
			m := oldMedianInPlace(clocks)
			comparable(power, m)
			levels.add(power, m)
		}
	}
	c.levels = levels.levels
	return c
}

// continued: after a pause as long as a window, a job starts afresh.
func oldContinued(c ClockLoss, start time.Time, fromOldest bool, now time.Time, window time.Duration) ClockLoss {
	same := !c.since.IsZero() && (c.since.Equal(start) || fromOldest && !c.since.After(start))
	switch {
	case !same:
		return ClockLoss{since: start}
	case c.busyAt.IsZero() || now.Sub(c.busyAt) > window:
		return ClockLoss{since: c.since}
	}
	return ClockLoss{levels: c.levels, since: c.since, busyAt: c.busyAt}
}

type oldLevelUpdate struct {
	levels []clockLevel
	copied bool
}

func (u *oldLevelUpdate) add(power, clock float64) {
	w := int(math.Floor(min(max(power, 0), 1e9)))
	k, found := slices.BinarySearchFunc(u.levels, w, func(l clockLevel, w int) int { return cmp.Compare(l.watt, w) })
	if found && u.levels[k].clock >= clock || !found && len(u.levels) >= maxClockLevels {
		return
	}
	if !u.copied {
		u.levels, u.copied = slices.Clone(u.levels), true
	}
	if found {
		u.levels[k] = clockLevel{w, power, clock}
		return
	}
	u.levels = slices.Insert(u.levels, k, clockLevel{w, power, clock})
}

func oldBusySample(s ThermalSample, cfg ThermalConfig) bool {
	if s.Utilization != nil {
		return *s.Utilization >= cfg.BusyUtilization
	}
	return s.Power >= cfg.BusyPower
}

// medianInPlace is the median of xs, which it sorts.
func oldMedianInPlace(xs []float64) float64 {
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

func oldMarginMean(run []ThermalSample) (mean float64, ok bool) {
	var n int
	for _, s := range run {
		if s.TemperatureMargin != nil {
			mean += *s.TemperatureMargin
			n++
		}
	}
	if n == 0 {
		return 0, false
	}
	return mean / float64(n), true
}

// judgeClocks: samples are all those held, as the busy stretch may begin before run.
func oldJudgeClocks(v *ThermalVerdict, run, samples []ThermalSample, now time.Time, previous ThermalVerdict, cfg ThermalConfig) {
	share, fall := ThermalSlowdownShare, ClockFallRatio
	if previous.State == Throttled {
		share *= stayCounterFactor
		fall *= stayFallFactor
	}
	v.SlowdownShare, _ = oldCounterShare(run, now, cfg)
	v.CounterSlowdown = v.SlowdownShare >= share

	v.Clock = oldClockLoss(samples, now, cfg, previous.Clock)
	v.ClockFell = v.Clock.fell(fall)
	warm := warmTemperature
	if previous.State == Throttled {
		warm -= stayHotMargin
	}
	v.ClockLost = v.ClockFell && (v.Clock.RecentTemperature >= warm || v.Hot)
	if v.Signature {
		v.SignatureOnly = !v.Clock.HasClock
		v.ClockHolding = v.Clock.HasClock && !v.ClockFell
	}
}

// hotByMargin: the driver knows its own limit better than a fixed temperature does.
func oldHotByMargin(v *ThermalVerdict, run []ThermalSample, prev ThermalState) {
	m, ok := oldMarginMean(run)
	if !ok {
		return
	}
	limit := HotMargin
	if prev == Throttled {
		limit += stayHotMargin
	}
	v.HasMargin, v.MarginMean = true, m
	v.Hot = m <= limit
}
