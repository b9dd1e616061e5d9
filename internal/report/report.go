// Package report summarises one run after the fact, from a thermal log or from
// Prometheus, and one boot's end from the flight recorder's file. Throttle
// episodes are the live collector's own verdicts, replayed or as recorded: the
// package holds no second thermal analysis.
package report

import (
	"math"
	"sort"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/judge"
)

// Report's JSON is stable (docs/report.md); absent figures are null, never 0.
type Report struct {
	Source           string   `json:"source"` // "csv" or "prometheus"
	Format           string   `json:"format,omitempty"`
	Instance         string   `json:"instance,omitempty"`
	GPU              int      `json:"gpu"`
	GPUs             []int    `json:"gpus_in_log,omitempty"`
	GPUName          *string  `json:"gpu_name"`
	GPUAssumed       bool     `json:"gpu_assumed_gb10"`
	GPUFromMachine   bool     `json:"gpu_name_from_nvml"`
	PowerRatingWatts *float64 `json:"power_rating_watts"`
	Assumptions      []string `json:"assumptions"`

	Start           time.Time     `json:"start"`
	End             time.Time     `json:"end"`
	DurationSeconds float64       `json:"duration_seconds"`
	Samples         int           `json:"samples"`
	IntervalSeconds float64       `json:"interval_seconds"`
	StepSeconds     float64       `json:"step_seconds"`
	SkippedLines    []SkippedLine `json:"skipped_lines"`
	SkippedTotal    int           `json:"skipped_lines_total"`
	Backward        Backward      `json:"time_stepped_back"`

	EnergyWattHours *float64 `json:"energy_wh"`
	EnergySource    string   `json:"energy_source,omitempty"` // energy_counter or integrated_power
	BusySeconds     float64  `json:"busy_seconds"`
	BusyBy          string   `json:"busy_by"` // utilization or power
	PlateauSeconds  *float64 `json:"plateau_seconds"`

	Temperature *Range `json:"temperature_celsius"`
	Power       *Range `json:"power_watts"`
	SMClock     *Range `json:"sm_clock_hertz"`

	Throttle      Throttle `json:"throttle"`
	Memory        *Memory  `json:"memory,omitempty"` // Prometheus only
	Alerts        []Alert  `json:"alerts,omitempty"` // Prometheus only
	AlertsLeftOut int      `json:"alerts_left_out,omitempty"`
	PointsLeftOut *int     `json:"points_left_out,omitempty"`

	Verdict      string `json:"verdict"`
	VerdictState string `json:"verdict_state"`

	samples       []judge.ThermalSample
	cfg           judge.ThermalConfig
	windowCovered bool
	pictureGap    time.Duration
}

type Backward struct {
	RepeatedHour int `json:"repeated_hour_samples"`
	Samples      int `json:"left_out_samples"`
	FirstLine    int `json:"first_line,omitempty"`
}

type SkippedLine struct {
	Line  int    `json:"line"`
	Error string `json:"error"`
}

type Range struct {
	Min  float64 `json:"min"`
	Mean float64 `json:"mean"`
	Max  float64 `json:"max"`
}

type Throttle struct {
	From             string    `json:"from"`
	Episodes         []Episode `json:"episodes"`
	EpisodesLeftOut  int       `json:"episodes_left_out"`
	ThrottledSeconds float64   `json:"throttled_seconds"`
	ThrottledRatio   float64   `json:"throttled_ratio"`
	evidence         map[string]bool
}

func (t Throttle) count() int { return len(t.Episodes) + t.EpisodesLeftOut }

type Episode struct {
	Start                  time.Time `json:"start"`
	End                    time.Time `json:"end"`
	Open                   bool      `json:"open"` // still throttled when the run ends
	DurationSeconds        float64   `json:"duration_seconds"`
	Evidence               string    `json:"evidence"`
	PeakTemperatureCelsius *float64  `json:"peak_temperature_celsius"`
	PowerMeanWatts         *float64  `json:"power_mean_watts"`
	SMClockBeforeHertz     *float64  `json:"sm_clock_before_hertz"`
	SMClockDuringHertz     *float64  `json:"sm_clock_during_hertz"`
	ThermalSlowdownSeconds *float64  `json:"thermal_slowdown_seconds"`

	Signature, NVML bool `json:"-"`
}

type Memory struct {
	LowestHeadroomBytes           *float64     `json:"lowest_headroom_bytes"`
	LowestHeadroomAfterFlushBytes *float64     `json:"lowest_headroom_after_flush_bytes"`
	PageCachePeakBytes            *float64     `json:"page_cache_peak_bytes"`
	OOMKills                      *int         `json:"oom_kills"`
	StallMinutes                  *float64     `json:"memory_stall_minutes"`
	Contention                    []Span       `json:"contention"`
	ContentionLeftOut             int          `json:"contention_left_out"`
	PlansStoppedFitting           []PlanMissed `json:"plans_stopped_fitting"`
}

type Span struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
}

// PlanMissed needed more than the headroom after a flush from Start on.
type PlanMissed struct {
	Plan  string    `json:"plan"`
	Start time.Time `json:"start"`
}

type Alert struct {
	Name     string    `json:"alertname"`
	Severity string    `json:"severity"`
	GPU      string    `json:"gpu,omitempty"`
	Start    time.Time `json:"start"`
	End      time.Time `json:"end"`
}

// build: energy is in joules, nil to integrate power; plateau says the GPU is a GB10.
func build(samples []judge.ThermalSample, episodes *episodeLog, throttled time.Duration, energy *float64, cfg judge.ThermalConfig, plateau bool) Report {
	sum := newSummary(cfg)
	for _, s := range samples {
		sum.add(s)
	}
	r := sum.report(episodes, throttled, energy, plateau)
	describeAll(r.Throttle.Episodes, func(yield func(judge.ThermalSample)) {
		for _, s := range samples {
			yield(s)
		}
	}, cfg)
	r.samples, r.pictureGap = samples, cfg.MaxGap()
	return r
}

// summary holds no sample.
type summary struct {
	cfg                                 judge.ThermalConfig
	n                                   int
	first, prev                         judge.ThermalSample
	utilization                         bool
	joules, busySeconds, plateauSeconds float64
	temp, power, clock                  *acc
}

func newSummary(cfg judge.ThermalConfig) *summary {
	return &summary{cfg: cfg, temp: newAcc(), power: newAcc(), clock: newAcc()}
}

func (m *summary) add(s judge.ThermalSample) {
	if m.n == 0 {
		m.first = s
	} else {
		// A sample stands for the time to the next one, but no longer
		// than MaxGap: nobody saw what happened in a longer silence.
		p := m.prev
		if gap := s.Time.Sub(p.Time); gap > 0 && gap <= m.cfg.MaxGap() {
			w := gap.Seconds()
			m.joules += (p.Power + s.Power) / 2 * w
			if busy(p, m.cfg) {
				m.busySeconds += w
				if p.Power >= judge.PlateauLowWatts && p.Power <= judge.PlateauHighWatts {
					m.plateauSeconds += w
				}
			}
		}
	}
	m.n++
	m.prev = s
	m.utilization = m.utilization || s.Utilization != nil
	m.temp.add(s.Temperature)
	m.power.add(s.Power)
	if s.SMClock != nil {
		m.clock.add(*s.SMClock)
	}
}

func (m *summary) report(episodes *episodeLog, throttled time.Duration, energy *float64, plateau bool) Report {
	r := Report{cfg: m.cfg, windowCovered: true, SkippedLines: []SkippedLine{}, Assumptions: []string{}, BusyBy: "power"}
	r.Throttle.Episodes, r.Throttle.EpisodesLeftOut = episodes.list()
	r.Throttle.evidence = episodes.evidence
	r.Samples = m.n
	r.IntervalSeconds = round(m.cfg.Interval.Seconds())
	r.StepSeconds = r.IntervalSeconds
	if m.n == 0 {
		return r
	}
	r.Start, r.End = m.first.Time, m.prev.Time
	r.DurationSeconds = round(r.End.Sub(r.Start).Seconds())
	if m.utilization {
		r.BusyBy = "utilization"
	}
	r.BusySeconds = round(m.busySeconds)
	if plateau {
		r.PlateauSeconds = ptr(round(m.plateauSeconds))
	}
	r.Temperature, r.Power, r.SMClock = m.temp.rng(), m.power.rng(), m.clock.rng()
	if energy != nil {
		r.EnergyWattHours = ptr(round(*energy / 3600))
		r.EnergySource = "energy_counter"
	} else {
		r.EnergyWattHours = ptr(round(m.joules / 3600))
		r.EnergySource = "integrated_power"
	}
	for i := range r.Throttle.Episodes {
		e := &r.Throttle.Episodes[i]
		e.DurationSeconds = round(e.End.Sub(e.Start).Seconds())
	}
	r.Throttle.ThrottledSeconds = round(throttled.Seconds())
	if r.DurationSeconds > 0 {
		r.Throttle.ThrottledRatio = round(r.Throttle.ThrottledSeconds / r.DurationSeconds)
	}
	return r
}

func busy(s judge.ThermalSample, cfg judge.ThermalConfig) bool {
	if s.Utilization != nil {
		return *s.Utilization >= cfg.BusyUtilization
	}
	return s.Power >= cfg.BusyPower
}

// describeAll's memory is bounded by the window, not the run.
func describeAll(episodes []Episode, samples func(yield func(judge.ThermalSample)), cfg judge.ThermalConfig) {
	if len(episodes) == 0 {
		return
	}
	type timed struct {
		t     time.Time
		clock float64
	}
	var window []timed // busy clocks of the latest window, oldest first
	k := 0             // the episode being described
	var peak, sum float64
	var n int
	during := map[float64]int{}
	var slowdown []float64
	finish := func() {
		e := &episodes[k]
		if n > 0 {
			e.PeakTemperatureCelsius = ptr(round(peak))
			e.PowerMeanWatts = ptr(round(sum / float64(n)))
		}
		e.SMClockDuringHertz = medianCounts(during)
		if e.ThermalSlowdownSeconds == nil && len(slowdown) == 2 && slowdown[1] >= slowdown[0] {
			e.ThermalSlowdownSeconds = ptr(round(slowdown[1] - slowdown[0]))
		}
		k++
		peak, sum, n, slowdown = math.Inf(-1), 0, 0, nil
		clear(during)
	}
	peak = math.Inf(-1)
	started := false
	samples(func(s judge.ThermalSample) {
		for k < len(episodes) && s.Time.After(episodes[k].End) {
			finish()
			started = false
		}
		if k < len(episodes) && !s.Time.Before(episodes[k].Start) {
			e := &episodes[k]
			if !started {
				started = true
				var before []float64
				for _, w := range window {
					if !w.t.Before(e.Start.Add(-cfg.Window)) {
						before = append(before, w.clock)
					}
				}
				e.SMClockBeforeHertz = median(before)
			}
			peak = max(peak, s.Temperature)
			sum += s.Power
			n++
			if s.SMClock != nil {
				during[clockBin(*s.SMClock)]++
			}
			if s.ThermalSlowdownSeconds != nil {
				slowdown = append(slowdown[:min(len(slowdown), 1)], *s.ThermalSlowdownSeconds)
			}
		}
		if s.SMClock != nil && busy(s, cfg) {
			window = append(window, timed{s.Time, *s.SMClock})
		}
		i := 0
		for i < len(window) && window[i].t.Before(s.Time.Add(-cfg.Window)) {
			i++
		}
		if i > 0 && i >= len(window)/2 {
			window = append(window[:0], window[i:]...)
		} else if i > 0 {
			window = window[i:]
		}
	})
	for k < len(episodes) {
		finish()
	}
}

// clockBin: within [0, 10 GHz], so that an episode's median costs at most 10,001 counts.
func clockBin(hz float64) float64 { return math.Round(min(max(hz, 0), 10e9) / 1e6) }

func medianCounts(counts map[float64]int) *float64 {
	total := 0
	bins := make([]float64, 0, len(counts))
	for b, c := range counts {
		bins = append(bins, b)
		total += c
	}
	if total == 0 {
		return nil
	}
	sort.Float64s(bins)
	at := func(i int) float64 { // the i-th clock in order
		for _, b := range bins {
			if i < counts[b] {
				return b
			}
			i -= counts[b]
		}
		return bins[len(bins)-1]
	}
	m := at(total / 2)
	if total%2 == 0 {
		m = (at(total/2-1) + m) / 2
	}
	return ptr(round(m * 1e6))
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
	m = round(m)
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

// round: the same on every architecture (a fused multiply-add may change the last bits).
func round(x float64) float64 { return math.Round(x*1000) / 1000 }
