// Package report summarises one run after the fact, from a thermal log or
// from Prometheus: how long, how much energy, how busy, how long at the
// platform's ~100 W plateau, the throttle episodes, and (from Prometheus)
// the pool's headroom, OOM kills, memory stalls, contention and the alerts
// that fired, with a one-line verdict to paste into a run log.
//
// Throttle episodes from a log are the verdicts of thermal.Replay, which
// steps the live collector's own Monitor; from Prometheus they are the
// verdicts the live collector recorded (spark_thermal_state). The package
// holds no second thermal analysis. docs/report.md documents the JSON.
package report

import (
	"math"
	"sort"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/judge"
)

// Report is one run's summary. Its JSON is stable: docs/report.md
// documents each field. Absent figures are null, never 0.
type Report struct {
	Source   string `json:"source"` // "csv" or "prometheus"
	Instance string `json:"instance,omitempty"`
	GPU      int    `json:"gpu"`

	Start           time.Time `json:"start"`
	End             time.Time `json:"end"`
	DurationSeconds float64   `json:"duration_seconds"`
	Samples         int       `json:"samples"`
	IntervalSeconds float64   `json:"interval_seconds"`
	// SkippedLines are the malformed lines of a log (CSV only).
	SkippedLines []SkippedLine `json:"skipped_lines"`

	EnergyWattHours *float64 `json:"energy_wh"`
	EnergySource    string   `json:"energy_source,omitempty"` // energy_counter or integrated_power
	BusySeconds     float64  `json:"busy_seconds"`
	BusyBy          string   `json:"busy_by"` // utilization or power
	PlateauSeconds  float64  `json:"plateau_seconds"`

	Temperature *Range `json:"temperature_celsius"`
	Power       *Range `json:"power_watts"`
	SMClock     *Range `json:"sm_clock_hertz"`

	Throttle Throttle `json:"throttle"`
	Memory   *Memory  `json:"memory,omitempty"` // Prometheus only
	Alerts   []Alert  `json:"alerts,omitempty"` // Prometheus only

	Verdict string `json:"verdict"`

	// For the picture: the samples and the thermal configuration.
	samples []judge.ThermalSample
	cfg     judge.ThermalConfig
}

// SkippedLine is a malformed line of a log, skipped.
type SkippedLine struct {
	Line  int    `json:"line"`
	Error string `json:"error"`
}

// Range is a quantity's lowest, mean and highest over the run.
type Range struct {
	Min  float64 `json:"min"`
	Mean float64 `json:"mean"`
	Max  float64 `json:"max"`
}

// Throttle is the throttling of the run.
type Throttle struct {
	// From: "replay" (the log's samples stepped through the live
	// collector's Monitor) or "recorded" (spark_thermal_state).
	From             string    `json:"from"`
	Episodes         []Episode `json:"episodes"`
	ThrottledSeconds float64   `json:"throttled_seconds"`
	ThrottledRatio   float64   `json:"throttled_ratio"`
}

// Episode is one throttle episode.
type Episode struct {
	Start           time.Time `json:"start"`
	End             time.Time `json:"end"`
	Open            bool      `json:"open"` // still throttled when the run ends
	DurationSeconds float64   `json:"duration_seconds"`
	// Evidence: signature, nvml_thermal_slowdown or
	// signature+nvml_thermal_slowdown, as the exporter's log says.
	Evidence               string   `json:"evidence"`
	PeakTemperatureCelsius *float64 `json:"peak_temperature_celsius"`
	PowerMeanWatts         *float64 `json:"power_mean_watts"`
	SMClockBeforeHertz     *float64 `json:"sm_clock_before_hertz"`
	SMClockDuringHertz     *float64 `json:"sm_clock_during_hertz"`
	// ThermalSlowdownSeconds is the growth of the driver's thermal
	// slowdown counters (sw + hw) over the episode, where known.
	ThermalSlowdownSeconds *float64 `json:"thermal_slowdown_seconds"`

	// What was seen at some step of a recorded episode.
	Signature, NVML bool `json:"-"`
}

// Memory is the pool over the run, from Prometheus.
type Memory struct {
	LowestHeadroomBytes           *float64     `json:"lowest_headroom_bytes"`
	LowestHeadroomAfterFlushBytes *float64     `json:"lowest_headroom_after_flush_bytes"`
	PageCachePeakBytes            *float64     `json:"page_cache_peak_bytes"`
	OOMKills                      *int         `json:"oom_kills"`
	StallMinutes                  *float64     `json:"memory_stall_minutes"`
	Contention                    []Span       `json:"contention"`
	PlansStoppedFitting           []PlanMissed `json:"plans_stopped_fitting"`
}

// Span is a stretch of the run.
type Span struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
}

// PlanMissed is a planned run that needed more than the headroom after a
// flush from Start on.
type PlanMissed struct {
	Plan  string    `json:"plan"`
	Start time.Time `json:"start"`
}

// Alert is a stretch during which an alert fired.
type Alert struct {
	Name     string    `json:"alertname"`
	Severity string    `json:"severity"`
	GPU      string    `json:"gpu,omitempty"`
	Start    time.Time `json:"start"`
	End      time.Time `json:"end"`
}

// build fills the figures that come from the samples alone; the episodes
// are given. energy is the counter's figure in joules, nil to integrate
// power.
func build(samples []judge.ThermalSample, episodes []Episode, throttled time.Duration, energy *float64, cfg judge.ThermalConfig) Report {
	r := Report{samples: samples, cfg: cfg, SkippedLines: []SkippedLine{}, BusyBy: "power",
		Throttle: Throttle{Episodes: episodes}}
	if r.Throttle.Episodes == nil {
		r.Throttle.Episodes = []Episode{}
	}
	r.Samples = len(samples)
	r.IntervalSeconds = cfg.Interval.Seconds()
	if len(samples) == 0 {
		return r
	}
	r.Start, r.End = samples[0].Time, samples[len(samples)-1].Time
	r.DurationSeconds = r.End.Sub(r.Start).Seconds()
	for _, s := range samples {
		if s.Utilization != nil {
			r.BusyBy = "utilization"
			break
		}
	}

	var joules float64
	temp, power := newAcc(), newAcc()
	clock := newAcc()
	for i, s := range samples {
		temp.add(s.Temperature)
		power.add(s.Power)
		if s.SMClock != nil {
			clock.add(*s.SMClock)
		}
		if i == len(samples)-1 {
			break
		}
		// Each sample stands for the time to the next one, but no longer
		// than a gap the analysis still reads as unbroken: nobody saw
		// what happened in a longer silence.
		gap := samples[i+1].Time.Sub(s.Time)
		if gap > cfg.MaxGap() {
			continue
		}
		w := gap.Seconds()
		joules += (s.Power + samples[i+1].Power) / 2 * w
		if busy(s, cfg) {
			r.BusySeconds += w
			if judge.AtPlateau(s.Power) { // the band the rules and the page use
				r.PlateauSeconds += w
			}
		}
	}
	r.Temperature, r.Power, r.SMClock = temp.rng(), power.rng(), clock.rng()
	if energy != nil {
		r.EnergyWattHours = ptr(round(*energy / 3600))
		r.EnergySource = "energy_counter"
	} else {
		r.EnergyWattHours = ptr(round(joules / 3600))
		r.EnergySource = "integrated_power"
	}

	for i := range r.Throttle.Episodes {
		describe(&r.Throttle.Episodes[i], samples, cfg)
	}
	r.Throttle.ThrottledSeconds = throttled.Seconds()
	if r.DurationSeconds > 0 {
		r.Throttle.ThrottledRatio = round(r.Throttle.ThrottledSeconds / r.DurationSeconds)
	}
	return r
}

// busy is the analysis's test of a busy GPU (judge.ThermalConfig's
// BusyUtilization, or BusyPower where utilisation is not reported),
// applied to one sample.
func busy(s judge.ThermalSample, cfg judge.ThermalConfig) bool {
	if s.Utilization != nil {
		return *s.Utilization >= cfg.BusyUtilization
	}
	return s.Power >= cfg.BusyPower
}

// describe fills an episode's figures from the samples: peak temperature,
// mean power and median SM clock during it, and the median SM clock of the
// busy samples of the window before it.
func describe(e *Episode, samples []judge.ThermalSample, cfg judge.ThermalConfig) {
	e.DurationSeconds = e.End.Sub(e.Start).Seconds()
	var during, before []float64
	peak, sum, n := math.Inf(-1), 0.0, 0
	for _, s := range samples {
		switch {
		case !s.Time.Before(e.Start) && !s.Time.After(e.End):
			peak = max(peak, s.Temperature)
			sum += s.Power
			n++
			if s.SMClock != nil {
				during = append(during, *s.SMClock)
			}
		case s.Time.Before(e.Start) && !s.Time.Before(e.Start.Add(-cfg.Window)):
			if s.SMClock != nil && busy(s, cfg) {
				before = append(before, *s.SMClock)
			}
		}
	}
	if n > 0 {
		e.PeakTemperatureCelsius = ptr(peak)
		e.PowerMeanWatts = ptr(round(sum / float64(n)))
	}
	e.SMClockDuringHertz = median(during)
	e.SMClockBeforeHertz = median(before)
}

func median(v []float64) *float64 {
	if len(v) == 0 {
		return nil
	}
	sort.Float64s(v)
	m := v[len(v)/2]
	if len(v)%2 == 0 {
		m = (v[len(v)/2-1] + m) / 2
	}
	return &m
}

type acc struct {
	min, max, sum float64
	n             int
}

func newAcc() *acc { return &acc{min: math.Inf(1), max: math.Inf(-1)} }

func (a *acc) add(v float64) {
	a.min, a.max = min(a.min, v), max(a.max, v)
	a.sum += v
	a.n++
}

func (a *acc) rng() *Range {
	if a.n == 0 {
		return nil
	}
	return &Range{Min: round(a.min), Mean: round(a.sum / float64(a.n)), Max: round(a.max)}
}

func ptr[T any](v T) *T { return &v }

// round keeps three decimals: figures to read, and the same on every
// architecture (a fused multiply-add may change the last bits).
func round(x float64) float64 { return math.Round(x*1000) / 1000 }

// Firing reports whether the named alert fired during the run.
func (r Report) Firing(name string) bool {
	for _, a := range r.Alerts {
		if a.Name == name {
			return true
		}
	}
	return false
}
