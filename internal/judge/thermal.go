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

// capacity is the samples a Window needs, with room for jitter.
func (c ThermalConfig) capacity() int { return 2*int(c.Window/c.Interval) + 4 }

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

// analyzeThermal judges the samples (oldest first) at now; prev is the previous state (hysteresis).
func analyzeThermal(samples []ThermalSample, now time.Time, prev ThermalState, cfg ThermalConfig) ThermalVerdict {
	w := &thermalWindow{cfg: cfg, capacity: max(len(samples), 2), buf: make([]ThermalSample, 0, len(samples)),
		marks: make([]mark, 0, len(samples))}
	for _, s := range samples {
		_ = w.add(s) // one out of order is left out, as a monitor leaves it
	}
	return w.analyze(now, ThermalVerdict{State: prev})
}

func powerMean(run []ThermalSample) float64 {
	var sum float64
	for _, s := range run {
		sum += s.Power
	}
	return sum / float64(len(run))
}

func temperatureMean(run []ThermalSample) float64 {
	var sum float64
	for _, s := range run {
		sum += s.Temperature
	}
	return sum / float64(len(run))
}

func powerExtremes(run []ThermalSample) (hi, lo float64) {
	hi, lo = math.Inf(-1), math.Inf(1)
	for _, s := range run {
		hi, lo = max(hi, s.Power), min(lo, s.Power)
	}
	return hi, lo
}

// exactSlope is the least-squares temperature slope over [a, b), in two passes.
func (w *thermalWindow) exactSlope(a, b int) (float64, bool) {
	if b-a < 2 {
		return 0, false
	}
	// Times relative to the first sample keep the sums small.
	t0 := w.marks[a].off
	var meanT, meanY float64
	for i := a; i < b; i++ {
		meanT += (w.marks[i].off - t0).Seconds()
		meanY += w.buf[i].Temperature
	}
	n := float64(b - a)
	meanT /= n
	meanY /= n
	var sxy, sxx float64
	for i := a; i < b; i++ {
		dt := (w.marks[i].off - t0).Seconds() - meanT
		sxy += dt * (w.buf[i].Temperature - meanY)
		sxx += dt * dt
	}
	if sxx == 0 {
		return 0, false
	}
	return sxy / sxx, true
}

func utilizationMean(run []ThermalSample) (float64, bool) {
	var sum float64
	var n int
	for _, s := range run {
		if s.Utilization != nil {
			sum += *s.Utilization
			n++
		}
	}
	if n == 0 {
		return 0, false
	}
	return sum / float64(n), true
}

func slowdownSeconds(s ThermalSample) *float64 { return s.ThermalSlowdownSeconds }

func powerCapSeconds(s ThermalSample) *float64 { return s.PowerCapSeconds }

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
