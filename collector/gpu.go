package collector

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/spark-exporter/spark_exporter/internal/collected"
	"github.com/spark-exporter/spark_exporter/internal/gpu"
	"github.com/spark-exporter/spark_exporter/internal/gpu/readings"
	"github.com/spark-exporter/spark_exporter/internal/hostfs"

	"github.com/spark-exporter/spark_exporter/internal/cliflag"
)

// The gpu collector is NVML's view of each GPU, as `nvidia-smi` shows it,
// and by spark_gpu_field_supported what a GB10 cannot report (memory info,
// power limit: `[N/A]`). A wedged driver fails this collector after
// --gpu.timeout, never the scrape. A scrape is served the thermal sampler's
// reading while it is at most --gpu.max-age old: NVML is not read twice for
// the same moment.
func init() {
	registerNVMLCollector("gpu", defaultEnabled, func(cliflag.FlagGroup) Factory {
		return func(env Env) (Collector, error) {
			if env.NVML == nil {
				return nil, errNoNVML
			}
			c, err := newGPUCollector(env.NVML, env.GPU.Timeout, env.GPU.MaxAge, hostfs.New(env.ProcFS), env.Logger)
			if c != nil {
				c.results = env.Results
			}
			return c, err
		}
	})
}

var (
	gpuUpDesc   = newDesc("spark_gpu_nvml_up", "1 when NVML is loaded and initialised; 0 without an NVIDIA driver or library (retried in the background).")
	gpuInfoDesc = newDesc("spark_gpu_info", "GPU identity, always 1.",
		"gpu", "uuid", "name", "driver_version", "cuda_driver_version", "compute_capability")
	gpuSupportedDesc = newDesc("spark_gpu_field_supported",
		"1 when the GPU answers the NVML field, 0 when NVML says it is not supported (N/A in nvidia-smi; its series are then absent).", "gpu", "field")
	gpuTempDesc       = newDesc("spark_gpu_temperature_celsius", "GPU core temperature.", "gpu")
	gpuPowerDesc      = newDesc("spark_gpu_power_watts", "GPU power draw.", "gpu")
	gpuEnergyDesc     = newDesc("spark_gpu_energy_joules_total", "Energy used by the GPU since the driver loaded.", "gpu")
	gpuPowerLimitDesc = newDesc("spark_gpu_power_limit_watts", "Enforced power limit (N/A on GB10, whose cap is the platform's).", "gpu")
	gpuSMClockDesc    = newDesc("spark_gpu_sm_clock_hertz", "Current SM clock.", "gpu")
	gpuSMClockMaxDesc = newDesc("spark_gpu_sm_clock_max_hertz", "Maximum SM clock.", "gpu")
	gpuUtilDesc       = newDesc("spark_gpu_utilization_ratio", "Fraction of the last sample period during which a kernel ran on the GPU.", "gpu")
	gpuMemTotalDesc   = newDesc("spark_gpu_memory_total_bytes", "NVML's total memory, the nvidia-smi view; absent on GB10, whose memory is the unified pool (see spark_pool_*).", "gpu")
	gpuMemUsedDesc    = newDesc("spark_gpu_memory_used_bytes", "NVML's used memory, the nvidia-smi view; absent on GB10 (see spark_pool_*).", "gpu")
	gpuReasonDesc     = newDesc("spark_gpu_clocks_event_active", "1 while NVML reports the reason as holding the clocks down, else 0.", "gpu", "reason")
	gpuEventSecsDesc  = newDesc("spark_gpu_clocks_event_seconds_total",
		"Time the driver has held the clocks down for the reason since it loaded (NVML clock event counters). On GB10 the flags of spark_gpu_clocks_event_active stay 0 while these grow.", "gpu", "reason")
	gpuMarginDesc     = newDesc("spark_gpu_temperature_margin_celsius", "Degrees left before the GPU's slowdown temperature (nvidia-smi's GPU T.Limit Temp).", "gpu")
	gpuPStateDesc     = newDesc("spark_gpu_performance_state", "Performance state number: 0 is P0 (full speed), 8 is P8 (idle).", "gpu")
	gpuProcMemoryDesc = newDesc("spark_gpu_process_memory_bytes", "GPU memory held by a compute process, per NVML; comm is empty when /proc/<pid>/comm cannot be read.", "gpu", "pid", "comm")
)

var gpuStalledDesc = newDesc("spark_gpu_nvml_stalled_seconds",
	"How long the NVML call still outstanding has waited, in whole seconds; 0 when none. The exporter's own clock, sent also while the wedged call fails the gpu collector.")

type gpuCollector struct {
	nvml    NVML
	results *collected.Results
	timeout time.Duration
	maxAge  time.Duration
	procfs  hostfs.FS // --path.procfs, for each process's comm
	logger  log.Logger

	// The metrics built from a served reading are kept while it is served;
	// not the per-process ones, whose comm is read afresh.
	mu        sync.Mutex
	builtFrom *readings.Reading // &Devices[0] of the snapshot built; each read makes a new slice
	built     []prometheus.Metric
}

func newGPUCollector(nvml NVML, timeout, maxAge time.Duration, fs hostfs.FS, logger log.Logger) (*gpuCollector, error) {
	if err := fs.CheckRoot(); err != nil {
		return nil, err
	}
	return &gpuCollector{nvml: nvml, timeout: timeout, maxAge: maxAge, procfs: fs, logger: logger}, nil
}

// read returns the reading, with how long the call outstanding after it
// had waited; gpu.ErrUnavailable (no driver) is a host state, not a failure.
func (c *gpuCollector) read() (*collected.GPU, error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	snap, err := c.nvml.Recent(ctx, c.maxAge)
	g := &collected.GPU{Loaded: true, Snapshot: snap, Stalled: c.nvml.Stalled()}
	switch {
	case errors.Is(err, gpu.ErrUnavailable):
		g.Loaded, g.Snapshot = false, readings.Snapshot{}
	case errors.Is(err, gpu.ErrTimeout):
		g.Snapshot = readings.Snapshot{}
		err = fmt.Errorf("%w (--gpu.timeout=%s): is the driver wedged?", err, c.timeout)
	}
	return g, err
}

// Update stores the reading failed or not: the page tells a wedged driver
// by its wait.
func (c *gpuCollector) Update(ctx context.Context, ch chan<- prometheus.Metric) error {
	g, err := c.read()
	err = c.send(ctx, ch, g, err)
	g.Failing = err != nil
	c.results.Set(func(st *collected.State) { st.GPU = g })
	return err
}

func (c *gpuCollector) send(ctx context.Context, ch chan<- prometheus.Metric, g *collected.GPU, err error) error {
	// Whole seconds: a healthy call, in flight for milliseconds, reads 0.
	ch <- prometheus.MustNewConstMetric(gpuStalledDesc, prometheus.GaugeValue, math.Floor(g.Stalled.Seconds()))
	switch {
	case errors.Is(err, gpu.ErrUnavailable):
		ch <- prometheus.MustNewConstMetric(gpuUpDesc, prometheus.GaugeValue, 0)
		return nil
	case errors.Is(err, gpu.ErrTimeout):
		ch <- prometheus.MustNewConstMetric(gpuUpDesc, prometheus.GaugeValue, 1)
		return err
	}
	ch <- prometheus.MustNewConstMetric(gpuUpDesc, prometheus.GaugeValue, 1)
	for _, m := range c.metrics(g.Snapshot, err) {
		ch <- m
	}
	var blocked error
	procfs := c.procfs.WithContext(ctx)
	for _, r := range g.Snapshot.Devices {
		processes(ch, procfs, r, &blocked)
	}
	// A device or field that failed (GPU lost) fails the collector, as does
	// a comm whose read blocked; what did answer has been sent.
	return errors.Join(err, blocked)
}

// metrics returns the metrics of every device but the per-process ones:
// those built last time when snap is the same reading, else built anew.
// Only a complete reading's are kept; a failed read is never served again.
func (c *gpuCollector) metrics(snap readings.Snapshot, err error) []prometheus.Metric {
	if len(snap.Devices) == 0 {
		return nil
	}
	from := &snap.Devices[0]
	c.mu.Lock()
	defer c.mu.Unlock()
	if from == c.builtFrom {
		return c.built
	}
	var ms []prometheus.Metric
	for _, r := range snap.Devices {
		ms = device(ms, snap, r)
	}
	if err == nil {
		c.builtFrom, c.built = from, ms
	}
	return ms
}

func device(ms []prometheus.Metric, snap readings.Snapshot, r readings.Reading) []prometheus.Metric {
	idx := strconv.Itoa(r.Index)
	gauge := func(d *prometheus.Desc, v *float64, labels ...string) {
		if v != nil {
			ms = append(ms, prometheus.MustNewConstMetric(d, prometheus.GaugeValue, *v, append([]string{idx}, labels...)...))
		}
	}
	bytes := func(d *prometheus.Desc, v *uint64) {
		if v != nil {
			ms = append(ms, prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(*v), idx))
		}
	}

	ms = append(ms, prometheus.MustNewConstMetric(gpuInfoDesc, prometheus.GaugeValue, 1,
		idx, r.UUID, r.Name, snap.DriverVersion, snap.CUDADriverVersion, r.ComputeCapability))
	for _, f := range readings.Fields {
		if ok, asked := r.Supported[f]; asked {
			ms = append(ms, prometheus.MustNewConstMetric(gpuSupportedDesc, prometheus.GaugeValue, boolToFloat64(ok), idx, string(f)))
		}
	}
	gauge(gpuTempDesc, r.TemperatureCelsius)
	gauge(gpuPowerDesc, r.PowerWatts)
	if r.EnergyJoules != nil {
		ms = append(ms, prometheus.MustNewConstMetric(gpuEnergyDesc, prometheus.CounterValue, *r.EnergyJoules, idx))
	}
	gauge(gpuPowerLimitDesc, r.PowerLimitWatts)
	gauge(gpuSMClockDesc, r.SMClockHertz)
	gauge(gpuSMClockMaxDesc, r.SMClockMaxHertz)
	gauge(gpuUtilDesc, r.Utilization)
	bytes(gpuMemTotalDesc, r.MemoryTotalBytes)
	bytes(gpuMemUsedDesc, r.MemoryUsedBytes)
	if r.ClockEventReasons != nil {
		for _, reason := range readings.ClockEventReasons {
			active := *r.ClockEventReasons&reason.Bit != 0
			ms = append(ms, prometheus.MustNewConstMetric(gpuReasonDesc, prometheus.GaugeValue, boolToFloat64(active), idx, reason.Name))
		}
	}
	for _, e := range readings.ClockEvents {
		if secs, ok := r.ClockEventSeconds[e.Name]; ok {
			ms = append(ms, prometheus.MustNewConstMetric(gpuEventSecsDesc, prometheus.CounterValue, secs, idx, e.Name))
		}
	}
	gauge(gpuMarginDesc, r.TemperatureMarginCelsius)
	if r.PerformanceState != nil {
		ms = append(ms, prometheus.MustNewConstMetric(gpuPStateDesc, prometheus.GaugeValue, float64(*r.PerformanceState), idx))
	}
	return ms
}

// processes sends the memory of each process on a device, with its comm as
// it is now. Once a comm read has blocked (*blocked set), the others of the
// scrape are not read: their comm is "".
func processes(ch chan<- prometheus.Metric, procfs hostfs.FS, r readings.Reading, blocked *error) {
	if len(r.Processes) == 0 {
		return
	}
	idx := strconv.Itoa(r.Index)
	for _, p := range r.Processes {
		ch <- prometheus.MustNewConstMetric(gpuProcMemoryDesc, prometheus.GaugeValue, float64(p.UsedBytes),
			idx, strconv.FormatUint(uint64(p.PID), 10), comm(procfs, p.PID, blocked))
	}
}

// comm is /proc/<pid>/comm, never the command line (which can hold
// secrets); empty when unreadable (exited, hidepid, another PID namespace).
func comm(procfs hostfs.FS, pid uint32, blocked *error) string {
	if *blocked != nil {
		return ""
	}
	name, err := procfs.ReadFile(strconv.FormatUint(uint64(pid), 10)+"/comm", make([]byte, 0, 64))
	if errors.Is(err, hostfs.ErrBlocked) {
		*blocked = fmt.Errorf("reading a process's comm: %w", err)
	}
	if err != nil {
		return ""
	}
	// A label value must be UTF-8, and a comm is any bytes a program sets.
	return strings.ToValidUTF8(strings.TrimSpace(string(name)), "\uFFFD")
}
