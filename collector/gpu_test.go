package collector

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/spark-exporter/spark_exporter/internal/collected"
	"github.com/spark-exporter/spark_exporter/internal/gpu"
	"github.com/spark-exporter/spark_exporter/internal/gpu/readings"
	"github.com/spark-exporter/spark_exporter/internal/gpu/thermalsampler"
	"github.com/spark-exporter/spark_exporter/internal/hostfs"
	"github.com/spark-exporter/spark_exporter/internal/testing/gputest"
	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
)

// newMockGPUCollector runs the gpu collector on a mock NVML and the spark
// fixture /proc.
func newMockGPUCollector(t *testing.T, lib nvml.Interface, timeout time.Duration) *gpuCollector {
	t.Helper()
	client := gpu.New(gpu.Options{NVML: lib, RetryMin: time.Hour})
	t.Cleanup(func() { client.Close() })
	c, err := newGPUCollector(client, timeout, 0, hostfs.New(fixtures), nopLogger())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestGPUOnGB10(t *testing.T) {
	d := gputest.GB10(0)
	d.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		return []nvml.ProcessInfo{
			{Pid: 4101, UsedGpuMemory: 41 * gputest.GiB},
			{Pid: 4102, UsedGpuMemory: 30 * gputest.GiB},
			{Pid: 4199, UsedGpuMemory: 2 * gputest.GiB}, // not in the fixture /proc
		}, nvml.SUCCESS
	}
	c := newMockGPUCollector(t, gputest.Library(d), time.Second)
	got, err := collect(t, c)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		"spark_gpu_nvml_up":              1,
		"spark_gpu_nvml_stalled_seconds": 0,
		`spark_gpu_info{compute_capability="12.1",cuda_driver_version="13.0",driver_version="580.95.05",gpu="0",name="NVIDIA GB10",uuid="GPU-test-0"}`: 1,
		`spark_gpu_temperature_celsius{gpu="0"}`: 87,
		`spark_gpu_power_watts{gpu="0"}`:         100.25,
		`spark_gpu_energy_joules_total{gpu="0"}`: 123456.789,
		`spark_gpu_sm_clock_hertz{gpu="0"}`:      1980e6,
		`spark_gpu_sm_clock_max_hertz{gpu="0"}`:  3003e6,
		`spark_gpu_utilization_ratio{gpu="0"}`:   0.98,
		// comm from testdata/proc/spark/<pid>/comm; empty when absent.
		`spark_gpu_process_memory_bytes{comm="python3",gpu="0",pid="4101"}`:      41 * gputest.GiB,
		`spark_gpu_process_memory_bytes{comm="embed-server",gpu="0",pid="4102"}`: 30 * gputest.GiB,
		`spark_gpu_process_memory_bytes{comm="",gpu="0",pid="4199"}`:             2 * gputest.GiB,
	}
	for _, f := range readings.Fields {
		want[`spark_gpu_field_supported{field="`+string(f)+`",gpu="0"}`] = 1
	}
	// nvidia-smi's [N/A] on GB10.
	want[`spark_gpu_field_supported{field="memory_info",gpu="0"}`] = 0
	want[`spark_gpu_field_supported{field="power_limit",gpu="0"}`] = 0
	for _, reason := range []string{"gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown", "sync_boost",
		"sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "display_clock_setting"} {
		active := 0.0
		if reason == "sw_power_cap" || reason == "sw_thermal_slowdown" {
			active = 1
		}
		want[`spark_gpu_clocks_event_active{gpu="0",reason="`+reason+`"}`] = active
	}
	// The counters, ns as seconds (gputest.ClockEventNanoseconds).
	for reason, secs := range map[string]float64{"sw_power_cap": 10800.240649, "sync_boost": 0,
		"sw_thermal_slowdown": 0.903158, "hw_thermal_slowdown": 1.195386, "hw_power_brake_slowdown": 0} {
		want[`spark_gpu_clocks_event_seconds_total{gpu="0",reason="`+reason+`"}`] = secs
	}
	want[`spark_gpu_temperature_margin_celsius{gpu="0"}`] = 13
	want[`spark_gpu_performance_state{gpu="0"}`] = 0
	compare(t, got, want)
}

// Every device gets its own series, keyed by index.
func TestGPUManyDevices(t *testing.T) {
	d1 := gputest.GB10(1)
	d1.GetTemperatureFunc = func(nvml.TemperatureSensors) (uint32, nvml.Return) { return 33, nvml.SUCCESS }
	d1.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) {
		return nvml.Memory_v2{Total: 80 * gputest.GiB, Used: 1 * gputest.GiB}, nvml.SUCCESS
	}
	c := newMockGPUCollector(t, gputest.Library(gputest.GB10(0), d1), time.Second)
	got, err := collect(t, c)
	if err != nil {
		t.Fatal(err)
	}
	for series, want := range map[string]float64{
		`spark_gpu_temperature_celsius{gpu="0"}`:                            87,
		`spark_gpu_temperature_celsius{gpu="1"}`:                            33,
		`spark_gpu_memory_total_bytes{gpu="1"}`:                             80 * gputest.GiB,
		`spark_gpu_memory_used_bytes{gpu="1"}`:                              1 * gputest.GiB,
		`spark_gpu_field_supported{field="memory_info",gpu="0"}`:            0,
		`spark_gpu_field_supported{field="memory_info",gpu="1"}`:            1,
		`spark_gpu_process_memory_bytes{comm="python3",gpu="1",pid="4101"}`: 41 * gputest.GiB,
	} {
		if v, ok := got[series]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", series, v, ok, want)
		}
	}
	if _, ok := got[`spark_gpu_memory_total_bytes{gpu="0"}`]; ok {
		t.Error("memory series for a device that does not answer memory info")
	}
}

// No NVML is normal: nvml_up 0, no other GPU series, and success.
func TestGPUWithoutNVML(t *testing.T) {
	lib := gputest.Library()
	lib.InitFunc = func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }
	c := newMockGPUCollector(t, lib, time.Second)
	got, err := collect(t, c)
	if err != nil {
		t.Fatalf("error %v without NVML; want success", err)
	}
	compare(t, got, map[string]float64{"spark_gpu_nvml_up": 0, "spark_gpu_nvml_stalled_seconds": 0})
}

// A GPU that fell off the bus fails the collector; the others are still
// reported.
func TestGPULostFailsTheCollector(t *testing.T) {
	lost := gputest.GB10(1)
	gone := func() (uint32, nvml.Return) { return 0, nvml.ERROR_GPU_IS_LOST }
	lost.GetPowerUsageFunc = gone
	c := newMockGPUCollector(t, gputest.Library(gputest.GB10(0), lost), time.Second)
	got, err := collect(t, c)
	if err == nil || !strings.Contains(err.Error(), "gpu 1") {
		t.Fatalf("error = %v, want one naming gpu 1", err)
	}
	if got["spark_gpu_nvml_up"] != 1 || got[`spark_gpu_power_watts{gpu="0"}`] != 100.25 {
		t.Errorf("healthy device or nvml_up missing: %v", got)
	}
	if _, ok := got[`spark_gpu_power_watts{gpu="1"}`]; ok {
		t.Error("a value for the lost device's failed field")
	}
	if _, ok := got[`spark_gpu_field_supported{field="power",gpu="1"}`]; ok {
		t.Error("a failed field reported as supported or not")
	}
}

// A wedged driver: the collector fails within --gpu.timeout, naming it, and
// still says how long the call has waited, on the client's clock; the
// status page is told the same. Once the driver answers, the stall is 0.
func TestGPUTimeout(t *testing.T) {
	d := gputest.GB10(0)
	var wedged atomic.Bool
	release := make(chan struct{})
	d.GetPowerUsageFunc = func() (uint32, nvml.Return) {
		if wedged.Load() {
			<-release
		}
		return 1000, nvml.SUCCESS
	}
	clk := &testClock{now: time.Date(2026, 9, 2, 3, 0, 0, 0, time.UTC)}
	client := gpu.New(gpu.Options{NVML: gputest.Library(d), RetryMin: time.Hour, Now: clk.Now})
	t.Cleanup(func() { client.Close() })
	unwedge := sync.OnceFunc(func() { close(release) })
	t.Cleanup(unwedge) // runs before the client's Close
	c, err := newGPUCollector(client, 30*time.Millisecond, 0, hostfs.New(fixtures), nopLogger())
	if err != nil {
		t.Fatal(err)
	}
	c.results = &collected.Results{}
	wedged.Store(true)
	if _, err := collect(t, c); err == nil || !strings.Contains(err.Error(), "--gpu.timeout=30ms") {
		t.Fatalf("error = %v, want a timeout naming --gpu.timeout", err)
	}
	clk.advance(9*time.Minute + 900*time.Millisecond)
	got, err := collect(t, c)
	if err == nil {
		t.Fatal("the collector succeeded while the driver is wedged")
	}
	compare(t, got, map[string]float64{"spark_gpu_nvml_up": 1, "spark_gpu_nvml_stalled_seconds": 540})
	if st := c.results.Parts(); st.GPU == nil || st.GPU.Stalled != 9*time.Minute+900*time.Millisecond || !st.GPU.Failing {
		t.Errorf("the status page is told %+v, want the stall of 9m0.9s, failing", st.GPU)
	}

	wedged.Store(false)
	unwedge()
	testexporter.Eventually(t, 10*time.Second, func() bool {
		got, err = collect(t, c)
		return err == nil && got["spark_gpu_nvml_stalled_seconds"] == 0
	}, "a reading with no stall once the driver answered")
	if st := c.results.Parts(); st.GPU == nil || st.GPU.Failing {
		t.Errorf("the status page is told %+v once the driver answered, want not failing", st.GPU)
	}
}

// testClock is a clock that moves only when told.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Invalid UTF-8 from the kernel or driver must not break the exposition.
func TestGPULabelsAreUTF8(t *testing.T) {
	d := gputest.GB10(0)
	d.GetNameFunc = func() (string, nvml.Return) { return "NVIDIA \xff", nvml.SUCCESS }
	d.GetUUIDFunc = func() (string, nvml.Return) { return "GPU-\xfe", nvml.SUCCESS }
	c := newMockGPUCollector(t, gputest.Library(d), time.Second)
	got, err := collect(t, c)
	if err != nil {
		t.Fatal(err)
	}
	for series := range got {
		if strings.HasPrefix(series, "spark_gpu_info") && (!strings.Contains(series, "name=\"NVIDIA \uFFFD\"") || !strings.Contains(series, "uuid=\"GPU-\uFFFD\"")) {
			t.Errorf("info = %s", series)
		}
	}
}

// A scrape is served the reading the thermal sampler has just taken: NVML
// is read once for both, while the reading is younger than --gpu.max-age.
// With --gpu.max-age=0 every scrape reads NVML.
func TestGPUServesTheThermalSamplersReading(t *testing.T) {
	d := gputest.GB10(0)
	client := gpu.New(gpu.Options{NVML: gputest.Library(d), RetryMin: time.Hour})
	t.Cleanup(func() { client.Close() })
	sampler := thermalsampler.NewSampler(gpu.WithTimeout(client, time.Second), oneMinute(), "", nopLogger())
	sampler.Sample(context.Background(), time.Now())
	reads := func() int { return len(d.GetPowerUsageCalls()) }
	if reads() != 1 {
		t.Fatalf("%d power reads after one sample", reads())
	}

	cached, err := newGPUCollector(client, time.Second, time.Hour, hostfs.New(fixtures), nopLogger())
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		got, err := collect(t, cached)
		if err != nil {
			t.Fatal(err)
		}
		if got[`spark_gpu_power_watts{gpu="0"}`] != 100.25 {
			t.Fatalf("power %v, want the sampler's 100.25 W", got[`spark_gpu_power_watts{gpu="0"}`])
		}
	}
	if reads() != 1 {
		t.Errorf("%d power reads after a sample and three scrapes, want 1", reads())
	}

	uncached, err := newGPUCollector(client, time.Second, 0, hostfs.New(fixtures), nopLogger())
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := collect(t, uncached); err != nil {
			t.Fatal(err)
		}
	}
	if reads() != 3 {
		t.Errorf("%d power reads after two scrapes with --gpu.max-age=0, want 3", reads())
	}
}

// The metrics kept for a served reading are sent while it is served and
// replaced with the next reading; a failed read's are not kept. With
// --gpu.max-age=0 every scrape reads NVML, so every scrape must show its
// own reading.
func TestGPUMetricsFollowTheReading(t *testing.T) {
	d := gputest.GB10(0)
	var milliwatts atomic.Uint32
	milliwatts.Store(1000)
	var fail atomic.Bool
	d.GetPowerUsageFunc = func() (uint32, nvml.Return) {
		if fail.Load() {
			return 0, nvml.ERROR_UNKNOWN
		}
		return milliwatts.Load(), nvml.SUCCESS
	}
	c := newMockGPUCollector(t, gputest.Library(d), time.Second)
	power := func() (float64, bool) {
		t.Helper()
		got, _ := collect(t, c)
		w, ok := got[`spark_gpu_power_watts{gpu="0"}`]
		return w, ok
	}
	for _, mw := range []uint32{1000, 2000, 2000, 3000} {
		milliwatts.Store(mw)
		if w, _ := power(); w != float64(mw)/1000 {
			t.Fatalf("power %v W, want the reading's %v W", w, float64(mw)/1000)
		}
	}
	fail.Store(true)
	if w, ok := power(); ok {
		t.Fatalf("power %v W from a failed read", w)
	}
	if w, ok := power(); ok {
		t.Fatalf("power %v W on the scrape after a failed read", w)
	}
	fail.Store(false)
	milliwatts.Store(4000)
	if w, _ := power(); w != 4 {
		t.Fatalf("power %v W, want the reading's 4 W", w)
	}
}

// The gpu and thermal collectors read the one NVML client they are handed
// in Env, with the --gpu.* settings: --gpu.max-age for the scrape's
// reading, --gpu.timeout bounding the sampler's reads. Closing them leaves
// the client to its owner.
func TestNVMLIsHandedIn(t *testing.T) {
	nvml := &fakeNVML{readings: []readings.Reading{reading(0, 90, 100, 0.97)}, readDone: make(chan struct{}, 1)}
	sel := selection(t, "--no-collector.pool", "--no-collector.workloads", "--thermal.interval=1h", "--thermal.window=3h")
	if !sel.NeedsNVML() {
		t.Fatal("NeedsNVML is false with the gpu and thermal collectors on")
	}
	env := testEnv()
	env.NVML, env.GPU = nvml, gpu.Settings{Timeout: time.Minute, MaxAge: 7 * time.Second}
	e, err := sel.Build(env)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-nvml.readDone: // the sampler's first sample
	case <-time.After(30 * time.Second):
		t.Fatal("the thermal sampler did not read within 30s of starting")
	}
	// The sampler judges its sample after the read returns: collect until
	// the thermal part holds it.
	var got map[string]float64
	collections := 0
	for deadline := time.Now().Add(30 * time.Second); ; {
		got = gatherAll(t, e)
		collections++
		if th := e.State().Thermal; th != nil && th.Snapshot.Samples > 0 || time.Now().After(deadline) {
			break
		}
		runtime.Gosched()
	}
	if got[`spark_gpu_power_watts{gpu="0"}`] != 100 {
		t.Errorf("the gpu collector did not report the handed-in NVML's reading: %v", got)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	nvml.mu.Lock()
	defer nvml.mu.Unlock()
	if nvml.recents != collections || nvml.maxAge != 7*time.Second {
		t.Errorf("the gpu collector asked %d times in %d collections, for readings up to %v old; want once each, --gpu.max-age's 7s", nvml.recents, collections, nvml.maxAge)
	}
	// The sampler's own bound is its interval, an hour: what is left is
	// at most --gpu.timeout's minute.
	if nvml.reads != 1 || nvml.deadline <= 0 || nvml.deadline > time.Minute {
		t.Errorf("the sampler read %d times, with %v left; want once, within --gpu.timeout", nvml.reads, nvml.deadline)
	}
	if th := e.State().Thermal; th == nil || th.Snapshot.Samples != 1 || len(th.Snapshot.GPUs) != 1 {
		t.Errorf("thermal state %+v; want the sample of GPU 0", th)
	}
}

// NVML is opened only for a collector that reads it, and a collector that
// reads it refuses to be built without it.
func TestNeedsNVML(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{nil, true},
		{[]string{"--no-collector.gpu"}, true},
		{[]string{"--no-collector.thermal"}, true},
		{[]string{"--no-collector.gpu", "--no-collector.thermal"}, false},
	} {
		if got := selection(t, tc.args...).NeedsNVML(); got != tc.want {
			t.Errorf("%q: NeedsNVML %v, want %v", tc.args, got, tc.want)
		}
	}
	for _, name := range []string{"gpu", "thermal"} {
		env := testEnv()
		env.NVML = nil
		if _, err := selection(t).factories[name](env); !errors.Is(err, errNoNVML) {
			t.Errorf("%s without NVML: %v", name, err)
		}
	}
	if th := NewExporter(nil, nil, nopLogger()).State().Thermal; th != nil {
		t.Error("a thermal snapshot without the thermal collector")
	}
}

// A driver without the clock event counters, the thermal margin and the
// P-state: their series are absent and spark_gpu_field_supported says so.
func TestGPUWithoutCountersMarginAndPState(t *testing.T) {
	d := gputest.GB10(0)
	d.GetFieldValuesFunc = func(values []nvml.FieldValue) nvml.Return {
		for i := range values {
			values[i].NvmlReturn = uint32(nvml.ERROR_NOT_SUPPORTED)
		}
		return nvml.SUCCESS
	}
	d.GetMarginTemperatureFunc = func() (nvml.MarginTemperature, nvml.Return) {
		return nvml.MarginTemperature{}, nvml.ERROR_NOT_SUPPORTED
	}
	d.GetPerformanceStateFunc = func() (nvml.Pstates, nvml.Return) { return nvml.PSTATE_UNKNOWN, nvml.ERROR_NOT_SUPPORTED }
	c := newMockGPUCollector(t, gputest.Library(d), time.Second)
	got, err := collect(t, c)
	if err != nil {
		t.Fatal(err)
	}
	for series := range got {
		for _, absent := range []string{"spark_gpu_clocks_event_seconds_total", "spark_gpu_temperature_margin_celsius", "spark_gpu_performance_state"} {
			if strings.HasPrefix(series, absent+"{") {
				t.Errorf("%s exported though NVML said NOT_SUPPORTED", series)
			}
		}
	}
	for _, field := range []string{"clocks_event_counters", "temperature_margin", "performance_state"} {
		if v, ok := got[`spark_gpu_field_supported{field="`+field+`",gpu="0"}`]; !ok || v != 0 {
			t.Errorf("field_supported{field=%q} = %v (present %v), want 0", field, v, ok)
		}
	}
}
