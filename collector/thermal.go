package collector

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spark-exporter/spark_exporter/internal/cliflag"
	"github.com/spark-exporter/spark_exporter/internal/collected"
	"github.com/spark-exporter/spark_exporter/internal/gpu"
	"github.com/spark-exporter/spark_exporter/internal/gpu/thermalsampler"
	"github.com/spark-exporter/spark_exporter/internal/judge"
)

// The thermal collector renders the snapshot of a sampler (thermalsampler)
// that reads each GPU every --thermal.interval and judges --thermal.window;
// its factory starts the sampler, Close stops it.
func init() {
	registerNVMLCollector("thermal", defaultEnabled, func(fg cliflag.FlagGroup) Factory {
		settings := AddThermalFlags(fg)
		return func(env Env) (Collector, error) {
			if env.NVML == nil {
				return nil, errNoNVML
			}
			cfg, err := settings.Config()
			if err != nil {
				return nil, err
			}
			sampler := thermalsampler.NewSampler(gpu.WithTimeout(env.NVML, env.GPU.Timeout), cfg, settings.CSVFile(), env.Logger)
			c := newThermalCollector(sampler)
			c.results = env.Results
			c.start()
			return c, nil
		}
	})
}

// ThermalSettings are --thermal.*, shared by the thermal collector and
// report, which replays a log as the collector would have judged it.
type ThermalSettings struct{ flags thermalFlags }

func AddThermalFlags(fg cliflag.FlagGroup) *ThermalSettings {
	return &ThermalSettings{flags: addThermalFlags(fg)}
}

// Config is the configuration the flags give, validated. Read it once the
// flags are parsed.
func (t *ThermalSettings) Config() (judge.ThermalConfig, error) {
	cfg := t.flags.config()
	if err := cfg.Validate(); err != nil {
		return cfg, fmt.Errorf("--thermal.* flags: %w", err)
	}
	return cfg, nil
}

func (t *ThermalSettings) CSVFile() string { return *t.flags.csvFile }

// thermalFlags are the --thermal.* flags. docs/thermal.md justifies each
// default, and judge.DefaultThermalConfig holds them.
type thermalFlags struct {
	interval, window                              *time.Duration
	nominal, belowRatio, flatSpread               *float64
	busyUtilization, busyPower, climbing, hotTemp *float64
	csvFile                                       *string
}

func addThermalFlags(fg cliflag.FlagGroup) thermalFlags {
	def := judge.DefaultThermalConfig()
	return thermalFlags{
		interval: cliflag.Duration(fg.Flag("thermal.interval",
			"Time between two samples of each GPU's temperature and power.").Default(durationText(def.Interval))),
		window: cliflag.Duration(fg.Flag("thermal.window",
			"Span of samples judged for the throttle signature (watch at least 10-15 minutes before concluding).").Default(durationText(def.Window))),
		nominal: cliflag.Float(fg.Flag("thermal.nominal-power",
			"Rated power in watts (the GB10's power brick: 240); the signature needs power below it.").Default(numberText(def.NominalPower)), 1, 1e5),
		belowRatio: cliflag.Float(fg.Flag("thermal.below-nominal-ratio",
			"Power is below the rating when its highest sample in the window is under this share of --thermal.nominal-power.").Default(numberText(def.BelowNominalRatio)), 0.01, 1),
		flatSpread: cliflag.Float(fg.Flag("thermal.flat-power-spread",
			"Power is flat when max - min over the window is at most this many watts.").Default(numberText(def.FlatSpread)), 0, 1e5),
		busyUtilization: cliflag.Float(fg.Flag("thermal.busy-utilization",
			"The GPU is busy when its mean utilisation over the window is at least this (0-1).").Default(numberText(def.BusyUtilization)), 0, 1),
		busyPower: cliflag.Float(fg.Flag("thermal.busy-power",
			"Where NVML gives no utilisation, the GPU is busy when its mean power is at least this many watts.").Default(numberText(def.BusyPower)), 0, 1e5),
		climbing: cliflag.Float(fg.Flag("thermal.climbing-slope",
			"Temperature climbs when its least-squares slope is at least this many °C per minute.").Default(numberText(def.ClimbingSlope*60)), 0, 100),
		hotTemp: cliflag.Float(fg.Flag("thermal.hot-temperature",
			"Where NVML gives no thermal margin, temperature holds hot when its mean over the window is at least this many °C.").Default(numberText(def.HotTemperature)), 0, 200),
		csvFile: fg.Flag("thermal.csv-file",
			"Append every sample to this file as timestamp,temperature.gpu,power.draw (the format of the thermal-sample.sh script GB10 fine-tuning guides use).").String(),
	}
}

// durationText writes 10m, not 10m0s.
func durationText(d time.Duration) string {
	text := d.String()
	for _, zeros := range []string{"0s", "0m"} {
		if t, ok := strings.CutSuffix(text, zeros); ok && len(t) > 0 && (t[len(t)-1] < '0' || t[len(t)-1] > '9') {
			text = t
		}
	}
	return text
}

// numberText writes a default with the digits it was given: the climbing
// slope's 0.5 °C/min is held as 0.5/60 °C/s, which times 60 is not exactly
// 0.5.
func numberText(x float64) string { return strconv.FormatFloat(x, 'g', 12, 64) }

func (f thermalFlags) config() judge.ThermalConfig {
	return judge.ThermalConfig{
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
	thermalStateDesc     = newDesc("spark_thermal_state", "1 for the GPU's thermal state: collecting (window not yet full), normal, watching (temperature rising, power not flat below nominal: keep watching), throttled.", "gpu", "state")
	thermalSignatureDesc = newDesc("spark_thermal_throttle_signature", "1 when the window shows the throttle signature: GPU busy, power flat and below nominal, temperature climbing or holding hot.", "gpu")
	thermalPowerMeanDesc = newDesc("spark_thermal_window_power_mean_watts", "Mean power over the window.", "gpu")
	thermalSpreadDesc    = newDesc("spark_thermal_window_power_spread_watts", "Max - min power over the window.", "gpu")
	thermalSlopeDesc     = newDesc("spark_thermal_window_temperature_slope_celsius_per_second", "Least-squares temperature slope over the window.", "gpu")
	thermalEpisodesDesc  = newDesc("spark_thermal_throttle_episodes_total", "Entries into the throttled state.", "gpu")
	thermalSecondsDesc   = newDesc("spark_thermal_throttled_seconds_total", "Time spent in the throttled state.", "gpu")
	thermalCSVErrorsDesc = newDesc("spark_thermal_csv_write_errors_total", "Samples that could not be appended to --thermal.csv-file.")
)

type thermalCollector struct {
	sampler *thermalsampler.Sampler
	latest  atomic.Pointer[judge.ThermalSnapshot]
	results *collected.Results

	cancel    context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once
	closeErr  error
}

// newThermalCollector renders sampler's snapshots without starting it:
// tests step the sampler themselves.
func newThermalCollector(sampler *thermalsampler.Sampler) *thermalCollector {
	return &thermalCollector{sampler: sampler}
}

func (c *thermalCollector) start() {
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	c.done = make(chan struct{})
	go func() {
		defer close(c.done)
		c.sampler.Run(ctx)
	}()
}

// Close stops the sampler (interrupting a read in progress) and closes the
// CSV log. NVML is not the collector's to close.
func (c *thermalCollector) Close() error {
	c.closeOnce.Do(func() {
		if c.cancel != nil {
			c.cancel()
			<-c.done
		}
		c.closeErr = c.sampler.Close()
	})
	return c.closeErr
}

func (c *thermalCollector) store(st *collected.State) {
	if snap := c.latest.Load(); snap != nil {
		st.Thermal = &collected.Thermal{Snapshot: *snap, Config: c.sampler.Config()}
	}
}

func (c *thermalCollector) snapshot() (judge.ThermalSnapshot, error) {
	snap := c.sampler.Snapshot()
	c.latest.Store(&snap)
	if len(snap.GPUs) == 0 {
		return snap, errNoData
	}
	return snap, nil
}

func (c *thermalCollector) Update(ctx context.Context, ch chan<- prometheus.Metric) error {
	snap, err := c.snapshot()
	c.results.Set(c.store)
	sendThermal(ch, snap)
	return err
}

func sendThermal(ch chan<- prometheus.Metric, snap judge.ThermalSnapshot) {
	if snap.CSV {
		ch <- prometheus.MustNewConstMetric(thermalCSVErrorsDesc, prometheus.CounterValue, float64(snap.CSVErrors))
	}
	for _, g := range snap.GPUs {
		v := g.Verdict
		label := strconv.Itoa(g.Index)
		gauge := func(d *prometheus.Desc, x float64, labels ...string) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, x, append([]string{label}, labels...)...)
		}
		for _, s := range judge.ThermalStates {
			gauge(thermalStateDesc, boolToFloat64(v.State == s), string(s))
		}
		gauge(thermalSignatureDesc, boolToFloat64(v.Signature))
		if st := v.Stats; st != nil {
			gauge(thermalPowerMeanDesc, st.PowerMean)
			gauge(thermalSpreadDesc, st.PowerSpread)
			if st.HasSlope {
				gauge(thermalSlopeDesc, st.Slope)
			}
		}
		ch <- prometheus.MustNewConstMetric(thermalEpisodesDesc, prometheus.CounterValue, float64(g.Episodes), label)
		ch <- prometheus.MustNewConstMetric(thermalSecondsDesc, prometheus.CounterValue, g.Throttled.Seconds(), label)
	}
}
