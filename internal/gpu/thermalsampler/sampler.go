// Package thermalsampler steps a judge.ThermalMonitor per GPU, appends to the CSV
// log and logs episodes; internal/judge does the judging.
package thermalsampler

import (
	"context"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/spark-exporter/spark_exporter/internal/gpu"
	"github.com/spark-exporter/spark_exporter/internal/gpu/readings"
	"github.com/spark-exporter/spark_exporter/internal/judge"
	"github.com/spark-exporter/spark_exporter/internal/thermallog"
)

// Sampler takes its time from Sample's now, so tests step it by hand.
type Sampler struct {
	src    gpu.Source
	cfg    judge.ThermalConfig
	logger log.Logger
	csv    *thermallog.Writer // nil without a CSV log

	mu          sync.Mutex                    // serialises Sample and Close; the fields below are theirs
	monitors    map[int]*judge.ThermalMonitor // by NVML device index
	samples     uint64
	csvErrors   int
	csvFailing  bool
	readFailing bool
	everRead    bool
	closed      bool

	snap atomic.Pointer[judge.ThermalSnapshot]
}

// NewSampler takes a validated cfg; csvFile, when set, is opened at the first sample.
func NewSampler(src gpu.Source, cfg judge.ThermalConfig, csvFile string, logger log.Logger) *Sampler {
	s := &Sampler{src: src, cfg: cfg, logger: logger, monitors: map[int]*judge.ThermalMonitor{}}
	if csvFile != "" {
		s.csv = thermallog.NewWriter(csvFile)
	}
	s.snap.Store(&judge.ThermalSnapshot{CSV: s.csv != nil})
	return s
}

func (s *Sampler) Snapshot() judge.ThermalSnapshot { return *s.snap.Load() }

func (s *Sampler) Config() judge.ThermalConfig { return s.cfg }

// Run samples at once, then once per interval, until ctx ends.
func (s *Sampler) Run(ctx context.Context) {
	ticker := time.NewTicker(s.cfg.Interval)
	defer ticker.Stop()
	s.Sample(ctx, time.Now())
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-ticker.C:
			s.Sample(ctx, now)
		}
	}
}

// Close closes the CSV log; the sampler must not be running.
func (s *Sampler) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.csv != nil {
		return s.csv.Close()
	}
	return nil
}

// Sample judges each GPU's window at now; a failed read is no sample. The
// read is bounded by the interval, so that a wedged driver cannot pile samples up.
func (s *Sampler) Sample(ctx context.Context, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	readCtx, cancel := context.WithTimeout(ctx, s.cfg.Interval)
	readings, err := s.src.Read(readCtx)
	cancel()
	if err != nil {
		readings = nil
	}

	samples := map[int]*judge.ThermalSample{}
	var rows []thermallog.Row
	for _, r := range readings {
		row := logRow(r, now)
		if row.Temperature != nil || row.Power != nil {
			rows = append(rows, row)
		}
		if row.Temperature != nil && row.Power != nil {
			samples[r.Index] = &judge.ThermalSample{Time: now, Temperature: *row.Temperature, Power: *row.Power,
				SMClock: judge.NonNegative(r.SMClockHertz), Utilization: ratio(r.Utilization), Reasons: r.ClockEventReasons,
				TemperatureMargin:      finite(r.TemperatureMarginCelsius),
				ThermalSlowdownSeconds: judge.ThermalSlowdownSeconds(r.ClockEventSeconds), PowerCapSeconds: judge.PowerCapSeconds(r.ClockEventSeconds)}
		}
	}
	s.noteRead(err)
	if s.csv != nil && len(rows) > 0 {
		s.noteCSV(s.csv.Append(rows...))
	}
	for idx := range samples {
		if s.monitors[idx] == nil {
			s.monitors[idx] = judge.NewThermalMonitor(s.cfg)
		}
	}
	for idx, m := range s.monitors {
		tr := m.Step(now, samples[idx])
		s.logTransition(idx, m.Verdict(), tr)
	}
	s.samples++
	s.snap.Store(s.snapshot())
}

// snapshot: s.mu is held.
func (s *Sampler) snapshot() *judge.ThermalSnapshot {
	snap := &judge.ThermalSnapshot{Samples: s.samples, CSV: s.csv != nil, CSVErrors: s.csvErrors,
		GPUs: make([]judge.GPUThermalState, 0, len(s.monitors))}
	for idx, m := range s.monitors {
		snap.GPUs = append(snap.GPUs, judge.GPUThermalState{Index: idx, Verdict: m.Verdict(),
			Episodes: m.Episodes(), Throttled: m.ThrottledTime(), Window: m.Samples()})
	}
	sort.Slice(snap.GPUs, func(i, j int) bool { return snap.GPUs[i].Index < snap.GPUs[j].Index })
	return snap
}

// logRow leaves out values no GPU can give.
func logRow(r readings.Reading, now time.Time) thermallog.Row {
	row := thermallog.Row{Time: r.Time}
	if row.Time.IsZero() {
		row.Time = now
	}
	if t := r.TemperatureCelsius; t != nil && !math.IsNaN(*t) && !math.IsInf(*t, 0) && *t > -273.15 {
		row.Temperature = t
	}
	row.Power = judge.NonNegative(r.PowerWatts)
	return row
}

func finite(v *float64) *float64 {
	if v == nil || math.IsNaN(*v) || math.IsInf(*v, 0) {
		return nil
	}
	return v
}

func ratio(v *float64) *float64 {
	if v == nil || !(*v >= 0 && *v <= 1) {
		return nil
	}
	return v
}

// noteRead leaves the error to the gpu collector: it may name the library's
// path. A host that never had a reading is normal and only noted.
func (s *Sampler) noteRead(err error) {
	const msg = "no GPU reading; the thermal sampler keeps trying every interval (spark_gpu_nvml_up tells why)"
	switch {
	case err != nil && !s.readFailing && s.everRead:
		level.Warn(s.logger).Log("msg", msg)
	case err != nil && !s.readFailing:
		level.Info(s.logger).Log("msg", msg)
	case err == nil && s.readFailing:
		level.Info(s.logger).Log("msg", "GPU readings are back; the thermal windows fill again")
	}
	s.readFailing = err != nil
	s.everRead = s.everRead || err == nil
}

func (s *Sampler) noteCSV(err error) {
	switch {
	case err != nil && !s.csvFailing:
		level.Warn(s.logger).Log("msg", "cannot append to --thermal.csv-file; samples are counted in spark_thermal_csv_write_errors_total until it works again", "err", err)
	case err == nil && s.csvFailing:
		level.Info(s.logger).Log("msg", "appending to --thermal.csv-file again")
	}
	s.csvFailing = err != nil
	if err != nil {
		s.csvErrors++
	}
}

func (s *Sampler) logTransition(idx int, v judge.ThermalVerdict, tr judge.ThermalTransition) {
	if tr.Refused {
		level.Debug(s.logger).Log("msg", "sample older than the previous one left out (clock stepped back)", "gpu", idx)
	}
	switch {
	case tr.Entered:
		kv := []any{"msg", "GPU thermal throttling: expect slower steps", "gpu", idx, "evidence", v.Evidence()}
		kv = append(kv, latestFields(v)...)
		if v.Stats != nil && v.Stats.HasSlope {
			kv = append(kv, "slope_celsius_per_minute", round2(v.Stats.Slope*60))
		}
		if v.Signature {
			kv = append(kv, "signature_window_seconds", math.Round(v.Span.Seconds()))
		}
		if c := v.Clock; c.HasClock && c.HasLevel {
			kv = append(kv, "sm_clock_level_hertz", c.Level, "sm_clock_recent_hertz", c.Recent)
		}
		if v.ThermalSlowdown {
			kv = append(kv, "nvml_slowdown_seconds", math.Round(v.SlowdownFor.Seconds()))
		}
		kv = append(kv, counterFields(v)...)
		level.Warn(s.logger).Log(kv...)
	case tr.Left:
		kv := []any{"msg", "GPU thermal throttling ended", "gpu", idx,
			"episode_seconds", math.Round(tr.Episode.Seconds()), "state", string(v.State)}
		kv = append(kv, latestFields(v)...)
		kv = append(kv, counterFields(v)...)
		level.Info(s.logger).Log(kv...)
	}
}

// counterFields: the SW power cap is the platform's cap, never throttling.
func counterFields(v judge.ThermalVerdict) []any {
	var kv []any
	if v.HasCounters {
		kv = append(kv, "window_thermal_slowdown_seconds", round2(v.SlowdownSeconds))
	}
	if v.HasPowerCap {
		kv = append(kv, "window_power_cap_seconds", round2(v.PowerCapSeconds))
	}
	return kv
}

func latestFields(v judge.ThermalVerdict) []any {
	var kv []any
	if s := v.Latest; s != nil {
		kv = append(kv, "temperature_celsius", round2(s.Temperature), "power_watts", round2(s.Power))
		if s.SMClock != nil {
			kv = append(kv, "sm_clock_hertz", *s.SMClock)
		}
	}
	if v.Stats != nil {
		kv = append(kv, "power_mean_watts", round2(v.Stats.PowerMean), "power_spread_watts", round2(v.Stats.PowerSpread))
	}
	return kv
}

func round2(x float64) float64 { return math.Round(x*100) / 100 }
