package judge

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// ThermalState is the verdict on a GPU's window.
type ThermalState string

const (
	Collecting ThermalState = "collecting"
	Normal     ThermalState = "normal"
	// Watching: temperature climbs but power is not flat below the rating (a warm-up).
	Watching  ThermalState = "watching"
	Throttled ThermalState = "throttled"
)

var ThermalStates = []ThermalState{Collecting, Normal, Watching, Throttled}

// gapIntervals may pass between samples before the window breaks: a longer silence is not a flat stretch.
const gapIntervals = 3

type ThermalConfig struct {
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

// DefaultThermalConfig is the flags' default; docs/thermal.md gives each figure's reason.
func DefaultThermalConfig() ThermalConfig {
	return ThermalConfig{
		Interval:          5 * time.Second,
		Window:            10 * time.Minute,
		NominalPower:      RatingWatts,
		BelowNominalRatio: 0.9,
		FlatSpread:        20,
		BusyUtilization:   0.5,
		BusyPower:         20,
		ClimbingSlope:     0.5 / 60,
		HotTemperature:    88,
	}
}

const maxSamples = 1 << 17

// maxWindow is far from the 292 years a time.Duration holds, which a replay's steps must stay within.
const maxWindow = 7 * 24 * time.Hour

func (c ThermalConfig) Validate() error {
	switch {
	case c.Interval <= 0:
		return errors.New("the sampling interval must be positive")
	case c.Window > maxWindow:
		return fmt.Errorf("the window (%v) is longer than %v", c.Window, maxWindow)
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

func (c ThermalConfig) MaxGap() time.Duration { return gapIntervals * c.Interval }

// Capacity is the samples a Window needs, with room for jitter.
func (c ThermalConfig) Capacity() int { return 2*int(c.Window/c.Interval) + 4 }

type ThermalStats struct {
	PowerMean       float64 // W
	PowerSpread     float64 // W: max − min
	PowerMax        float64 // W
	TemperatureMean float64 // °C
	Slope           float64
	HasSlope        bool
	// EarlySlope and RecentSlope cover the window's halves: a climb must still be on.
	EarlySlope, RecentSlope       float64
	HasEarlySlope, HasRecentSlope bool
}

type ThermalVerdict struct {
	State ThermalState
	// Signature: busy, power flat below the rating, temperature climbing or hot.
	Signature bool
	// ThermalSlowdown: NVML's thermal reasons set for SlowdownFor without a break.
	ThermalSlowdown bool
	SlowdownFor     time.Duration
	// CounterSlowdown: on GB10 the flags stay clear, the counters grow.
	CounterSlowdown bool
	HasCounters     bool
	SlowdownSeconds float64
	HasPowerCap     bool
	PowerCapSeconds float64

	Covered bool           // the samples cover the whole window without a gap
	Span    time.Duration  // from the first analysed sample to now
	Samples int            // samples analysed
	Latest  *ThermalSample // the newest sample, nil when none is recent
	Stats   *ThermalStats  // nil when no sample is recent

	// Climbing is Rising and not levelling off.
	Busy, Flat, BelowNominal, Rising, Climbing, Hot bool

	// The signature throttles only with ClockFell; with a steady clock it is
	// ClockHolding (Watching), with none logged SignatureOnly. ClockLost: the
	// clock fell at comparable power while warm, however slowly it warmed.
	SlowdownShare                                     float64
	Clock                                             ClockLoss
	ClockFell, ClockLost, ClockHolding, SignatureOnly bool
	HasMargin                                         bool
	MarginMean                                        float64
}

// Hysteresis: a Throttled GPU stays so under relaxed thresholds, so that
// a figure wavering at its threshold makes one episode, not many.
const (
	stayClimbingFactor = 0.5 // of ClimbingSlope
	stayHotMargin      = 2.0 // °C under HotTemperature
	stayFlatFactor     = 1.5 // of FlatSpread
)

// settlingRatio: a latest half climbing at under this share of the
// earlier half's rate is levelling off after a rise in load (a first-order
// approach slows by e^(−W/2τ) per half window), not climbing at flat power.
const settlingRatio = 0.5

// AnalyzeThermal judges the samples (oldest first) at now; prev is the previous
// state (hysteresis). Only the unbroken run ending near now counts.
func AnalyzeThermal(samples []ThermalSample, now time.Time, prev ThermalState, cfg ThermalConfig) ThermalVerdict {
	return AnalyzeThermalAfter(samples, now, ThermalVerdict{State: prev}, cfg)
}

// AnalyzeThermalAfter is AnalyzeThermal given the whole previous verdict,
// whose clock level carries a busy stretch longer than the samples held.
func AnalyzeThermalAfter(samples []ThermalSample, now time.Time, previous ThermalVerdict, cfg ThermalConfig) ThermalVerdict {
	prev := previous.State
	run := unbroken(samples, now, cfg.MaxGap())
	if len(run) == 0 {
		return ThermalVerdict{State: Collecting}
	}
	windowStart := now.Add(-cfg.Window)
	v := ThermalVerdict{Covered: !run[0].Time.After(windowStart)}
	if v.Covered {
		run = since(run, windowStart)
	}
	latest := run[len(run)-1]
	v.Latest = &latest
	v.Samples = len(run)
	v.Span = now.Sub(run[0].Time)
	st := stats(run, now.Add(-cfg.Window/2))
	v.Stats = &st

	v.ThermalSlowdown = latest.thermalSlowdown()
	if v.ThermalSlowdown {
		v.SlowdownFor = now.Sub(slowdownStart(run))
	}
	v.SlowdownSeconds, v.HasCounters = growth(run, func(s ThermalSample) *float64 { return s.ThermalSlowdownSeconds })
	v.PowerCapSeconds, v.HasPowerCap = growth(run, func(s ThermalSample) *float64 { return s.PowerCapSeconds })

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
	case (v.Signature && !v.ClockHolding) || v.ClockLost || v.ThermalSlowdown || v.CounterSlowdown:
		// A clock lost while warm needs no signature: a slow heat soak
		// climbs under its slope. NVML's word needs no full window.
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

func unbroken(samples []ThermalSample, now time.Time, maxGap time.Duration) []ThermalSample {
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

func since(samples []ThermalSample, t time.Time) []ThermalSample {
	for i, s := range samples {
		if !s.Time.Before(t) {
			return samples[i:]
		}
	}
	return nil
}

func stats(run []ThermalSample, recentFrom time.Time) ThermalStats {
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
	st.Slope, st.HasSlope = slope(run)
	recent := since(run, recentFrom)
	st.EarlySlope, st.HasEarlySlope = slope(run[:len(run)-len(recent)])
	st.RecentSlope, st.HasRecentSlope = slope(recent)
	return st
}

// rises requires the latest half to climb too.
func rises(st ThermalStats, rate float64) bool {
	return st.HasSlope && st.HasRecentSlope && st.Slope >= rate && st.RecentSlope >= rate
}

func settling(st ThermalStats) bool {
	return st.HasEarlySlope && st.HasRecentSlope && st.RecentSlope < settlingRatio*st.EarlySlope
}

func slope(run []ThermalSample) (float64, bool) {
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

func busy(run []ThermalSample, st ThermalStats, cfg ThermalConfig) bool {
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

func slowdownStart(run []ThermalSample) time.Time {
	i := len(run) - 1
	for i > 0 && run[i-1].thermalSlowdown() {
		i--
	}
	return run[i].Time
}

// growth adds up a counter's rises. A counter that went down was reset
// (the driver reloaded) and counts from zero, as Prometheus's increase()
// reads it.
func growth(run []ThermalSample, counter func(ThermalSample) *float64) (total float64, ok bool) {
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

// Evidence names what made the verdict Throttled, joined by "+": signature,
// clock_fall, signature_only, nvml_thermal_slowdown, thermal_slowdown_counters.
func (v ThermalVerdict) Evidence() string {
	var parts []string
	switch signature := v.Signature && !v.ClockHolding; {
	case signature && v.SignatureOnly:
		parts = append(parts, "signature_only")
	case signature && v.ClockFell:
		parts = append(parts, "signature", "clock_fall")
	case signature: // a recorded signature that does not say which
		parts = append(parts, "signature")
	case v.ClockLost:
		parts = append(parts, "clock_fall")
	}
	if v.ThermalSlowdown {
		parts = append(parts, "nvml_thermal_slowdown")
	}
	if v.CounterSlowdown {
		parts = append(parts, "thermal_slowdown_counters")
	}
	return strings.Join(parts, "+")
}
