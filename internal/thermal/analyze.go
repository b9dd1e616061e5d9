package thermal

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// State is the verdict on a GPU's window.
type State string

const (
	// Collecting: the samples do not yet cover a whole window (just
	// started, or after a gap in the samples).
	Collecting State = "collecting"
	// Normal: nothing to watch.
	Normal State = "normal"
	// Watching: temperature climbs while power is not flat below the
	// rating (a warm-up near peak power): not yet throttling, keep watching.
	Watching State = "watching"
	// Throttled: the throttle signature, or NVML reporting a thermal
	// slowdown (its flags, or its thermal slowdown counters growing).
	Throttled State = "throttled"
)

// States lists every state, for one-hot export.
var States = []State{Collecting, Normal, Watching, Throttled}

// GapIntervals is how many sampling intervals may pass between two samples
// before the window is taken as broken: a few missed reads are tolerated,
// a longer silence is not read as a flat stretch.
const GapIntervals = 3

// Config holds the sampling cadence and every threshold of the verdict.
type Config struct {
	Interval time.Duration // time between samples
	Window   time.Duration // span analysed

	NominalPower      float64 // W: the power rating (240 W brick on GB10)
	BelowNominalRatio float64 // power is below the rating when its window maximum is under this share of it
	FlatSpread        float64 // W: power is flat when max − min over the window is at most this
	BusyUtilization   float64 // 0–1: mean utilisation from which the GPU counts as busy
	BusyPower         float64 // W: mean power from which the GPU counts as busy when utilisation is not reported
	ClimbingSlope     float64 // °C/s: temperature climbs when its slope is at least this
	HotTemperature    float64 // °C: temperature holds hot when its window mean is at least this
}

// DefaultConfig is the configuration the flags default to; docs/thermal.md
// gives the reasons for each figure.
func DefaultConfig() Config {
	return Config{
		Interval:          5 * time.Second,
		Window:            10 * time.Minute,
		NominalPower:      240,
		BelowNominalRatio: 0.9,
		FlatSpread:        20,
		BusyUtilization:   0.5,
		BusyPower:         20,
		ClimbingSlope:     0.5 / 60,
		HotTemperature:    88,
	}
}

// maxSamples bounds the memory a window may take.
const maxSamples = 1 << 17

// Validate refuses a configuration the analysis cannot work with.
func (c Config) Validate() error {
	switch {
	case c.Interval <= 0:
		return errors.New("the sampling interval must be positive")
	case c.Window < 3*c.Interval:
		return fmt.Errorf("the window (%v) must hold at least three sampling intervals (%v each)", c.Window, c.Interval)
	case c.Window/c.Interval > maxSamples:
		return fmt.Errorf("the window (%v) holds more than %d sampling intervals (%v each)", c.Window, maxSamples, c.Interval)
	case !(c.NominalPower > 0):
		return errors.New("the nominal power must be positive")
	case !(c.BelowNominalRatio > 0 && c.BelowNominalRatio <= 1):
		return errors.New("the below-nominal ratio must be in (0, 1]")
	case !(c.FlatSpread >= 0):
		return errors.New("the flat power spread must not be negative")
	case !(c.BusyUtilization >= 0 && c.BusyUtilization <= 1):
		return errors.New("the busy utilisation must be in [0, 1]")
	case !(c.BusyPower >= 0):
		return errors.New("the busy power must not be negative")
	case math.IsNaN(c.ClimbingSlope) || math.IsInf(c.ClimbingSlope, 0):
		return errors.New("the climbing slope must be a number")
	case math.IsNaN(c.HotTemperature) || math.IsInf(c.HotTemperature, 0):
		return errors.New("the hot temperature must be a number")
	}
	return nil
}

// MaxGap is the longest silence between samples that still counts as one
// unbroken run.
func (c Config) MaxGap() time.Duration { return GapIntervals * c.Interval }

// Capacity is the number of samples a Window needs: a whole window and
// room for jitter in the sampling times.
func (c Config) Capacity() int { return 2*int(c.Window/c.Interval) + 4 }

// Stats are the figures of the analysed samples.
type Stats struct {
	PowerMean       float64 // W
	PowerSpread     float64 // W: max − min
	PowerMax        float64 // W
	TemperatureMean float64 // °C
	// Slope is the least-squares temperature slope in °C/s, over the
	// whole window; HasSlope is false with fewer than two samples.
	Slope    float64
	HasSlope bool
	// EarlySlope and RecentSlope are the same over the window's earlier
	// and latest halves: a climb must still be on by now, and not be a
	// warm-up levelling off.
	EarlySlope, RecentSlope       float64
	HasEarlySlope, HasRecentSlope bool
}

// Verdict is the analysis of one GPU's window at one moment.
type Verdict struct {
	State State
	// Signature: the window shows the throttle signature (busy, power
	// flat below the rating, temperature climbing or holding hot).
	Signature bool
	// ThermalSlowdown: the latest sample carries NVML's thermal slowdown
	// reasons; SlowdownFor is how long they have been set without a break.
	ThermalSlowdown bool
	SlowdownFor     time.Duration
	// CounterSlowdown: NVML's thermal slowdown counters grew for at
	// least CounterShare of the recent span. The driver held the clocks
	// down for heat, whatever its flags say (on GB10 they stay clear
	// while the counters grow).
	CounterSlowdown bool
	// HasCounters: the analysed samples carry the thermal slowdown
	// counters. SlowdownSeconds is then their growth over those samples
	// (the window): seconds of thermal slowdown.
	HasCounters     bool
	SlowdownSeconds float64
	// HasPowerCap and PowerCapSeconds are the same for the SW power cap
	// counter: the platform cap at work, never throttling.
	HasPowerCap     bool
	PowerCapSeconds float64

	Covered bool          // the samples cover the whole window without a gap
	Span    time.Duration // from the first analysed sample to now
	Samples int           // samples analysed
	Latest  *Sample       // the newest sample, nil when none is recent
	Stats   *Stats        // nil when no sample is recent

	// The parts of the verdict, for logs and tests. Rising: temperature
	// going up over the window and its latest half. Climbing: rising and
	// not levelling off, the signature's test.
	Busy, Flat, BelowNominal, Rising, Climbing, Hot bool

	// Clock-loss evidence (clockloss.go). SlowdownShare: the thermal
	// slowdown counters' growth over the recent span, as a share of it
	// (CounterSlowdown is its test). Clock: the SM clock over the busy
	// stretch; ClockFell: it fell below its earlier level. The signature
	// counts as throttling only with ClockFell: with a clock that holds it
	// is ClockHolding (Watching: "hot, clock holding"), and without any
	// clock SignatureOnly (throttling by the signature alone, clocks not
	// logged). HasMargin, MarginMean: the driver's thermal margin (°C to
	// its slowdown limit), which decides Hot where the samples carry it.
	SlowdownShare                          float64
	Clock                                  ClockLoss
	ClockFell, ClockHolding, SignatureOnly bool
	HasMargin                              bool
	MarginMean                             float64
}

// Hysteresis: a GPU already Throttled stays so under relaxed thresholds,
// so that a slope or a spread wavering at its threshold makes one episode,
// not a string of them.
const (
	stayClimbingFactor = 0.5 // of ClimbingSlope
	stayHotMargin      = 2.0 // °C under HotTemperature
	stayFlatFactor     = 1.5 // of FlatSpread
)

// settlingRatio: when the latest half of the window climbs at less than
// this share of the earlier half's rate, the temperature is levelling off
// after a rise in load (a first-order approach slows by e^(−W/2τ) per half
// window), not climbing at flat power. It guards the signature only: a
// warm-up still rising near peak power is Watching.
const settlingRatio = 0.5

// Analyze judges the samples (oldest first) as they stand at now; prev is
// the state of the previous verdict (hysteresis). Only the unbroken run of
// samples ending near now counts: a gap of more than MaxGap cuts the run,
// and the state stays Collecting until the run covers a whole window again.
func Analyze(samples []Sample, now time.Time, prev State, cfg Config) Verdict {
	return analyze(samples, now, Verdict{State: prev}, cfg)
}

// analyze is Analyze given the whole previous verdict, whose clock level
// a busy stretch longer than the samples held carries forward.
func analyze(samples []Sample, now time.Time, previous Verdict, cfg Config) Verdict {
	prev := previous.State
	run := unbroken(samples, now, cfg.MaxGap())
	if len(run) == 0 {
		return Verdict{State: Collecting}
	}
	windowStart := now.Add(-cfg.Window)
	v := Verdict{Covered: !run[0].Time.After(windowStart)}
	if v.Covered {
		run = since(run, windowStart)
	}
	latest := run[len(run)-1]
	v.Latest = &latest
	v.Samples = len(run)
	v.Span = now.Sub(run[0].Time)
	st := stats(run, now.Add(-cfg.Window/2))
	v.Stats = &st

	v.ThermalSlowdown = latest.ThermalSlowdown()
	if v.ThermalSlowdown {
		v.SlowdownFor = now.Sub(slowdownStart(run))
	}
	v.SlowdownSeconds, v.HasCounters = growth(run, func(s Sample) *float64 { return s.ThermalSlowdownSeconds })
	v.PowerCapSeconds, v.HasPowerCap = growth(run, func(s Sample) *float64 { return s.PowerCapSeconds })

	climbing, hot, flat := cfg.ClimbingSlope, cfg.HotTemperature, cfg.FlatSpread
	if prev == Throttled {
		climbing *= stayClimbingFactor
		hot -= stayHotMargin
		flat *= stayFlatFactor
	}
	v.Busy = busy(run, st, cfg)
	v.Flat = st.PowerSpread <= flat
	v.BelowNominal = st.PowerMax < cfg.BelowNominalRatio*cfg.NominalPower
	v.Rising = rises(st, cfg.ClimbingSlope)
	v.Climbing = rises(st, climbing) && !settling(st)
	v.Hot = st.TemperatureMean >= hot
	hotByMargin(&v, run, prev)
	v.Signature = v.Covered && v.Busy && v.Flat && v.BelowNominal && (v.Climbing || v.Hot)
	judgeClocks(&v, run, samples, now, previous, cfg)

	switch {
	case (v.Signature && !v.ClockHolding) || v.ThermalSlowdown || v.CounterSlowdown:
		// The clocks were lost (or, unlogged, the signature stands
		// alone). NVML's own word needs no full window.
		v.State = Throttled
	case !v.Covered:
		v.State = Collecting
	case v.ClockHolding || (v.Rising && !(v.Flat && v.BelowNominal)):
		v.State = Watching
	default:
		v.State = Normal
	}
	return v
}

// unbroken returns the latest run of samples with no gap longer than
// maxGap, ignoring samples after now; it is empty when the newest sample
// is older than maxGap.
func unbroken(samples []Sample, now time.Time, maxGap time.Duration) []Sample {
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

// since returns the samples at or after t.
func since(samples []Sample, t time.Time) []Sample {
	for i, s := range samples {
		if !s.Time.Before(t) {
			return samples[i:]
		}
	}
	return nil
}

func stats(run []Sample, recentFrom time.Time) Stats {
	st := Stats{PowerMax: math.Inf(-1)}
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
	st.Slope, st.HasSlope = slope(run)
	recent := since(run, recentFrom)
	st.EarlySlope, st.HasEarlySlope = slope(run[:len(run)-len(recent)])
	st.RecentSlope, st.HasRecentSlope = slope(recent)
	return st
}

// rises: the temperature goes up at least at rate over the window and
// over its latest half (it is still going up now).
func rises(st Stats, rate float64) bool {
	return st.HasSlope && st.HasRecentSlope && st.Slope >= rate && st.RecentSlope >= rate
}

// settling: the latest half climbs far slower than the earlier one, as a
// temperature levelling off after a rise in load does.
func settling(st Stats) bool {
	return st.HasEarlySlope && st.HasRecentSlope && st.RecentSlope < settlingRatio*st.EarlySlope
}

// slope is the least-squares slope of temperature against time, in °C/s.
func slope(run []Sample) (float64, bool) {
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

// busy: by utilisation where NVML reports it, by power where it does not.
func busy(run []Sample, st Stats, cfg Config) bool {
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

// slowdownStart is the time of the first sample of the latest unbroken
// stretch of thermal slowdown reasons.
func slowdownStart(run []Sample) time.Time {
	i := len(run) - 1
	for i > 0 && run[i-1].ThermalSlowdown() {
		i--
	}
	return run[i].Time
}

// growth adds up how much a counter of the samples went up, skipping
// samples without it. A counter that went down was reset (the driver
// reloaded) and counts from zero again, as Prometheus's increase() reads
// it. ok is false when no two samples carry the counter.
func growth(run []Sample, counter func(Sample) *float64) (total float64, ok bool) {
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

// Evidence names what made the verdict Throttled, joined by "+":
// signature+clock_fall (the window's shape with the SM clock falling),
// signature_only (the shape, with no clock logged to confirm it),
// nvml_thermal_slowdown (NVML's flags), thermal_slowdown_counters (NVML's
// counters growing for a material share of the time). It is empty for a
// verdict with none.
func (v Verdict) Evidence() string {
	var parts []string
	switch {
	case !v.Signature || v.ClockHolding:
	case v.SignatureOnly:
		parts = append(parts, "signature_only")
	case v.ClockFell:
		parts = append(parts, "signature", "clock_fall")
	default: // a recorded signature that does not say which
		parts = append(parts, "signature")
	}
	if v.ThermalSlowdown {
		parts = append(parts, "nvml_thermal_slowdown")
	}
	if v.CounterSlowdown {
		parts = append(parts, "thermal_slowdown_counters")
	}
	return strings.Join(parts, "+")
}
