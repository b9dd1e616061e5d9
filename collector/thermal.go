package collector

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/spark-exporter/spark_exporter/internal/cliflag"
	"github.com/spark-exporter/spark_exporter/internal/gpu"
	"github.com/spark-exporter/spark_exporter/internal/thermal"
	"github.com/spark-exporter/spark_exporter/internal/thermallog"
)

// The thermal collector is the thermal watch of docs/design.md as software: a
// sampler beside the run reads each GPU's temperature, power, SM clock,
// utilisation and clock event reasons every --thermal.interval, keeps
// --thermal.window of them, and judges the window (internal/thermal): the
// throttle signature (busy, power flat below the rating, temperature
// climbing or holding hot) or NVML's own thermal slowdown reasons. Entering
// and leaving a throttle episode is logged, once each; with
// --thermal.csv-file every sample is also appended to the nvidia-smi CSV log.
func init() {
	registerCollector("thermal", defaultEnabled, func(fg FlagGroup) Factory {
		flags := addThermalFlags(fg)
		return func(env Env) (Collector, error) {
			cfg := flags.config()
			if err := cfg.Validate(); err != nil {
				return nil, fmt.Errorf("--thermal.* flags: %w", err)
			}
			src, release, err := acquireNVML(env)
			if err != nil {
				return nil, err
			}
			c := newThermalCollector(src, release, cfg, *flags.csvFile, env.Logger)
			c.start()
			return c, nil
		}
	})
}

// thermalFlags are the collector's flags; docs/thermal.md justifies each
// default.
type thermalFlags struct {
	interval, window                              *time.Duration
	nominal, belowRatio, flatSpread               *float64
	busyUtilization, busyPower, climbing, hotTemp *float64
	csvFile                                       *string
}

func addThermalFlags(fg FlagGroup) thermalFlags {
	return thermalFlags{
		interval: cliflag.Duration(fg.Flag("thermal.interval",
			"Time between two samples of each GPU's temperature and power.").Default("5s")),
		window: cliflag.Duration(fg.Flag("thermal.window",
			"Span of samples judged for the throttle signature (the guide: watch at least 10-15 minutes).").Default("10m")),
		nominal: cliflag.Float(fg.Flag("thermal.nominal-power",
			"Rated power in watts (the GB10's power brick: 240); the signature needs power below it.").Default("240"), 1, 1e5),
		belowRatio: cliflag.Float(fg.Flag("thermal.below-nominal-ratio",
			"Power is below the rating when its highest sample in the window is under this share of --thermal.nominal-power.").Default("0.9"), 0.01, 1),
		flatSpread: cliflag.Float(fg.Flag("thermal.flat-power-spread",
			"Power is flat when max - min over the window is at most this many watts.").Default("20"), 0, 1e5),
		busyUtilization: cliflag.Float(fg.Flag("thermal.busy-utilization",
			"The GPU is busy when its mean utilisation over the window is at least this (0-1).").Default("0.5"), 0, 1),
		busyPower: cliflag.Float(fg.Flag("thermal.busy-power",
			"Where NVML gives no utilisation, the GPU is busy when its mean power is at least this many watts.").Default("20"), 0, 1e5),
		climbing: cliflag.Float(fg.Flag("thermal.climbing-slope",
			"Temperature climbs when its least-squares slope is at least this many °C per minute.").Default("0.5"), 0, 100),
		hotTemp: cliflag.Float(fg.Flag("thermal.hot-temperature",
			"Temperature holds hot when its mean over the window is at least this many °C.").Default("85"), 0, 200),
		csvFile: fg.Flag("thermal.csv-file",
			"Append every sample to this file as timestamp,temperature.gpu,power.draw (the guide's thermal-sample.sh log).").String(),
	}
}

func (f thermalFlags) config() thermal.Config {
	return thermal.Config{
		Interval:          *f.interval,
		Window:            *f.window,
		NominalPower:      *f.nominal,
		BelowNominalRatio: *f.belowRatio,
		FlatSpread:        *f.flatSpread,
		BusyUtilization:   *f.busyUtilization,
		BusyPower:         *f.busyPower,
		ClimbingSlope:     *f.climbing / 60,
		HotTemperature:    *f.hotTemp,
	}
}

var (
	thermalStateDesc     = newDesc("thermal", "state", "1 for the GPU's thermal state: collecting (window not yet full), normal, watching (temperature rising, power not flat below nominal: keep watching), throttled.", "gpu", "state")
	thermalSignatureDesc = newDesc("thermal", "throttle_signature", "1 when the window shows the throttle signature: GPU busy, power flat and below nominal, temperature climbing or holding hot.", "gpu")
	thermalPowerMeanDesc = newDesc("thermal", "window_power_mean_watts", "Mean power over the window.", "gpu")
	thermalSpreadDesc    = newDesc("thermal", "window_power_spread_watts", "Max - min power over the window.", "gpu")
	thermalSlopeDesc     = newDesc("thermal", "window_temperature_slope_celsius_per_second", "Least-squares temperature slope over the window.", "gpu")
	thermalEpisodesDesc  = newDesc("thermal", "throttle_episodes_total", "Entries into the throttled state.", "gpu")
	thermalSecondsDesc   = newDesc("thermal", "throttled_seconds_total", "Time spent in the throttled state.", "gpu")
	thermalCSVErrorsDesc = newDesc("thermal", "csv_write_errors_total", "Samples that could not be appended to --thermal.csv-file.")
)

type thermalCollector struct {
	src     gpu.Source
	release func()
	cfg     thermal.Config
	logger  log.Logger
	csv     *thermallog.Writer // nil without --thermal.csv-file

	mu          sync.Mutex
	monitors    map[int]*thermal.Monitor // by NVML device index
	csvErrors   int
	csvFailing  bool
	readFailing bool
	everRead    bool // a reading has come at least once
	// built holds the metrics Update sends, built by the first scrape
	// after a sample: they change only when the sampler samples, so the
	// scrapes in between send them again. nil: none built since the
	// last sample.
	built []prometheus.Metric

	cancel    context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once
}

// newThermalCollector builds the collector without starting its sampler:
// tests drive it through sample.
func newThermalCollector(src gpu.Source, release func(), cfg thermal.Config, csvFile string, logger log.Logger) *thermalCollector {
	c := &thermalCollector{src: src, release: release, cfg: cfg, logger: logger,
		monitors: map[int]*thermal.Monitor{}}
	if csvFile != "" {
		c.csv = thermallog.NewWriter(csvFile)
	}
	return c
}

// start runs the sampler in the background until Close: one sample at
// once, then one per interval.
func (c *thermalCollector) start() {
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.done = make(chan struct{})
	go func() {
		defer close(c.done)
		ticker := time.NewTicker(c.cfg.Interval)
		defer ticker.Stop()
		c.sample(ctx, time.Now())
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-ticker.C:
				c.sample(ctx, now)
			}
		}
	}()
}

// Close stops the sampler (interrupting a read in progress), closes the
// CSV log and gives NVML back.
func (c *thermalCollector) Close() error {
	var err error
	c.closeOnce.Do(func() {
		if c.cancel != nil {
			c.cancel()
			<-c.done
		}
		if c.csv != nil {
			err = c.csv.Close()
		}
		c.release()
	})
	return err
}

// sample reads every GPU once and judges each one's window at now. A failed
// read is no sample: the windows age, and go back to collecting after a
// gap.
func (c *thermalCollector) sample(ctx context.Context, now time.Time) {
	readCtx, cancel := context.WithTimeout(ctx, c.cfg.Interval)
	readings, err := c.src.Read(readCtx)
	cancel()
	if err != nil {
		readings = nil
	}

	samples := map[int]*thermal.Sample{}
	var rows []thermallog.Row
	for _, r := range readings {
		row := logRow(r, now)
		if row.Temperature != nil || row.Power != nil {
			rows = append(rows, row)
		}
		if row.Temperature != nil && row.Power != nil {
			samples[r.Index] = &thermal.Sample{Time: now, Temperature: *row.Temperature, Power: *row.Power,
				SMClock: nonNegative(r.SMClockHertz), Utilization: ratio(r.Utilization), Reasons: r.ClockEventReasons,
				ThermalSlowdownSeconds: thermalSlowdownSeconds(r.ClockEventSeconds), PowerCapSeconds: counter(r.ClockEventSeconds, "sw_power_cap")}
		}
	}
	var csvErr error
	if c.csv != nil && len(rows) > 0 {
		csvErr = c.csv.Append(rows...)
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	c.noteRead(err)
	if c.csv != nil && len(rows) > 0 {
		c.noteCSV(csvErr)
	}
	for idx := range samples {
		if c.monitors[idx] == nil {
			c.monitors[idx] = thermal.NewMonitor(c.cfg)
		}
	}
	for idx, m := range c.monitors {
		tr := m.Step(now, samples[idx])
		c.logTransition(idx, m.Verdict(), tr)
	}
	c.built = nil
}

// thermalSlowdownSeconds adds up NVML's SW and HW thermal slowdown
// counters; nil when the reading has neither.
func thermalSlowdownSeconds(secs map[string]float64) *float64 {
	sw, hw := counter(secs, "sw_thermal_slowdown"), counter(secs, "hw_thermal_slowdown")
	switch {
	case sw == nil:
		return hw
	case hw == nil:
		return sw
	}
	sum := *sw + *hw
	return &sum
}

// counter is one clock event counter of a reading, nil when absent or not
// a count of seconds.
func counter(secs map[string]float64, reason string) *float64 {
	v, ok := secs[reason]
	if !ok {
		return nil
	}
	return nonNegative(&v)
}

// logRow keeps the reading's temperature and power for the CSV log and the
// analysis, leaving out values no GPU can give.
func logRow(r gpu.Reading, now time.Time) thermallog.Row {
	row := thermallog.Row{Time: r.Time}
	if row.Time.IsZero() {
		row.Time = now
	}
	if t := r.TemperatureCelsius; t != nil && !math.IsNaN(*t) && !math.IsInf(*t, 0) && *t > -273.15 {
		row.Temperature = t
	}
	row.Power = nonNegative(r.PowerWatts)
	return row
}

func nonNegative(v *float64) *float64 {
	if v == nil || !(*v >= 0) || math.IsInf(*v, 1) {
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

// noteRead logs NVML's failures when they start and stop; the error itself
// is left to the gpu collector, which owns NVML (and whose errors may name
// the library's path). Readings that stop are a warning; a host that never
// had any (no GPU, no driver) is normal and only noted.
func (c *thermalCollector) noteRead(err error) {
	const msg = "no GPU reading; the thermal sampler keeps trying every interval (spark_gpu_nvml_up tells why)"
	switch {
	case err != nil && !c.readFailing && c.everRead:
		level.Warn(c.logger).Log("msg", msg)
	case err != nil && !c.readFailing:
		level.Info(c.logger).Log("msg", msg)
	case err == nil && c.readFailing:
		level.Info(c.logger).Log("msg", "GPU readings are back; the thermal windows fill again")
	}
	c.readFailing = err != nil
	c.everRead = c.everRead || err == nil
}

// noteCSV counts failed appends and logs when they start and stop.
func (c *thermalCollector) noteCSV(err error) {
	switch {
	case err != nil && !c.csvFailing:
		level.Warn(c.logger).Log("msg", "cannot append to --thermal.csv-file; samples are counted in spark_thermal_csv_write_errors_total until it works again", "err", err)
	case err == nil && c.csvFailing:
		level.Info(c.logger).Log("msg", "appending to --thermal.csv-file again")
	}
	c.csvFailing = err != nil
	if err != nil {
		c.csvErrors++
	}
}

// logTransition writes the explicit throttle log: one warning on entering
// an episode, one line on leaving it, nothing in between.
func (c *thermalCollector) logTransition(idx int, v thermal.Verdict, tr thermal.Transition) {
	if tr.Refused {
		level.Debug(c.logger).Log("msg", "sample older than the previous one left out (clock stepped back)", "gpu", idx)
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
		if v.ThermalSlowdown {
			kv = append(kv, "nvml_slowdown_seconds", math.Round(v.SlowdownFor.Seconds()))
		}
		kv = append(kv, counterFields(v)...)
		level.Warn(c.logger).Log(kv...)
	case tr.Left:
		kv := []any{"msg", "GPU thermal throttling ended", "gpu", idx,
			"episode_seconds", math.Round(tr.Episode.Seconds()), "state", string(v.State)}
		kv = append(kv, latestFields(v)...)
		kv = append(kv, counterFields(v)...)
		level.Info(c.logger).Log(kv...)
	}
}

// counterFields are the seconds NVML's counters grew over the window:
// thermal slowdown (evidence) and SW power cap (the platform cap, never
// throttling), where the driver reports them.
func counterFields(v thermal.Verdict) []any {
	var kv []any
	if v.HasCounters {
		kv = append(kv, "window_thermal_slowdown_seconds", round2(v.SlowdownSeconds))
	}
	if v.HasPowerCap {
		kv = append(kv, "window_power_cap_seconds", round2(v.PowerCapSeconds))
	}
	return kv
}

func latestFields(v thermal.Verdict) []any {
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

// oneIf renders a condition as a 0/1 gauge value.
func oneIf(cond bool) float64 { return supported(cond) }

func (c *thermalCollector) Update(ch chan<- prometheus.Metric) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.built == nil {
		c.built = c.metrics()
	}
	for _, m := range c.built {
		ch <- m
	}
	if len(c.monitors) == 0 {
		return ErrNoData
	}
	return nil
}

// metrics builds what Update sends from the latest sample; c.mu is held.
func (c *thermalCollector) metrics() []prometheus.Metric {
	ms := []prometheus.Metric{}
	if c.csv != nil {
		ms = append(ms, prometheus.MustNewConstMetric(thermalCSVErrorsDesc, prometheus.CounterValue, float64(c.csvErrors)))
	}
	indices := make([]int, 0, len(c.monitors))
	for idx := range c.monitors {
		indices = append(indices, idx)
	}
	sort.Ints(indices)
	for _, idx := range indices {
		m := c.monitors[idx]
		v := m.Verdict()
		label := strconv.Itoa(idx)
		gauge := func(d *prometheus.Desc, x float64, labels ...string) {
			ms = append(ms, prometheus.MustNewConstMetric(d, prometheus.GaugeValue, x, append([]string{label}, labels...)...))
		}
		for _, s := range thermal.States {
			gauge(thermalStateDesc, oneIf(v.State == s), string(s))
		}
		gauge(thermalSignatureDesc, oneIf(v.Signature))
		if st := v.Stats; st != nil {
			gauge(thermalPowerMeanDesc, st.PowerMean)
			gauge(thermalSpreadDesc, st.PowerSpread)
			if st.HasSlope {
				gauge(thermalSlopeDesc, st.Slope)
			}
		}
		ms = append(ms, prometheus.MustNewConstMetric(thermalEpisodesDesc, prometheus.CounterValue, float64(m.Episodes()), label),
			prometheus.MustNewConstMetric(thermalSecondsDesc, prometheus.CounterValue, m.ThrottledTime().Seconds(), label))
	}
	return ms
}
