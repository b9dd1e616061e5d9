package collector

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/alecthomas/kingpin/v2"

	"github.com/spark-exporter/spark_exporter/internal/gpu"
	"github.com/spark-exporter/spark_exporter/internal/gpu/gputest"
)

// newMockGPUCollector runs the gpu collector on a mock NVML and the spark
// fixture /proc.
func newMockGPUCollector(t *testing.T, lib nvml.Interface, timeout time.Duration) *gpuCollector {
	t.Helper()
	client := gpu.New(gpu.Options{NVML: lib, RetryMin: time.Hour})
	released := false
	c, err := newGPUCollector(client, timeout, 0, fixtures, func() { released = true; client.Close() }, nopLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Close()
		if !released {
			t.Error("Close did not release the NVML client")
		}
	})
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
		"spark_gpu_nvml_up": 1,
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
	for _, f := range gpu.Fields {
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
	compare(t, got, map[string]float64{"spark_gpu_nvml_up": 0})
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

// A wedged driver: the collector fails within --gpu.timeout, naming it.
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
	c := newMockGPUCollector(t, gputest.Library(d), 30*time.Millisecond)
	t.Cleanup(func() { close(release) }) // runs before the collector's Close
	wedged.Store(true)
	got, err := collect(t, c)
	if err == nil || !strings.Contains(err.Error(), "--gpu.timeout=30ms") {
		t.Fatalf("error = %v, want a timeout naming --gpu.timeout", err)
	}
	compare(t, got, map[string]float64{"spark_gpu_nvml_up": 1})
}

// Invalid UTF-8 from the kernel or driver must not break the exposition.
func TestGPULabelsAreUTF8(t *testing.T) {
	d := gputest.GB10(0)
	d.GetNameFunc = func() (string, nvml.Return) { return "NVIDIA \xff", nvml.SUCCESS }
	c := newMockGPUCollector(t, gputest.Library(d), time.Second)
	got, err := collect(t, c)
	if err != nil {
		t.Fatal(err)
	}
	for series := range got {
		if strings.HasPrefix(series, "spark_gpu_info") && !strings.Contains(series, "name=\"NVIDIA \uFFFD\"") {
			t.Errorf("info = %s", series)
		}
	}
}

// The gpu and thermal collectors share one client, closed by the last
// release only; --gpu.timeout bounds the shared source's reads.
func TestSharedNVMLClient(t *testing.T) {
	library, timeout := "/nonexistent/libnvidia-ml.so.1", 50*time.Millisecond
	setNVMLFlags(&library, &timeout)
	t.Cleanup(func() { setNVMLFlags(nil, nil) })

	first, gotTimeout, releaseFirst := acquireNVMLClient(nopLogger())
	if gotTimeout != timeout {
		t.Errorf("timeout %v, want the flag's %v", gotTimeout, timeout)
	}
	src, releaseSecond, err := acquireNVML(Env{Logger: nopLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if ds, ok := src.(deadlineSource); !ok || ds.src != first || ds.timeout != timeout {
		t.Fatalf("second user got %#v, want the first user's client with --gpu.timeout", src)
	}
	if _, err := src.Read(context.Background()); !errors.Is(err, gpu.ErrUnavailable) {
		t.Errorf("read without a library: %v", err)
	}

	releaseFirst()
	releaseFirst() // a second call must not count twice
	if sharedNVML.client != first {
		t.Fatal("client closed while a user holds it")
	}
	releaseSecond()
	if sharedNVML.client != nil || sharedNVML.users != 0 {
		t.Fatalf("client kept after the last release (users %d)", sharedNVML.users)
	}
	again, _, releaseAgain := acquireNVMLClient(nopLogger())
	defer releaseAgain()
	if again == first {
		t.Error("a closed client was handed out again")
	}
}

// The gpu collector's flags reach the shared client through the registry.
func TestGPUFlags(t *testing.T) {
	t.Cleanup(func() { setNVMLFlags(nil, nil) })
	app := kingpin.New("t", "")
	AddFlags(app)
	if _, err := app.Parse([]string{"--gpu.nvml-library=/opt/nvidia/libnvidia-ml.so.1", "--gpu.timeout=750ms"}); err != nil {
		t.Fatal(err)
	}
	if library, timeout := nvmlSettings(); library != "/opt/nvidia/libnvidia-ml.so.1" || timeout != 750*time.Millisecond {
		t.Errorf("settings %q %v", library, timeout)
	}
	app = kingpin.New("t", "")
	AddFlags(app)
	if _, err := app.Parse([]string{"--gpu.timeout=soon"}); err == nil || !strings.Contains(err.Error(), "--gpu.timeout") {
		t.Errorf("error %v does not name --gpu.timeout", err)
	}
}

// A scrape is served the reading the thermal sampler has just taken: NVML
// is read once for both, while the reading is younger than --gpu.max-age.
// With --gpu.max-age=0 every scrape reads NVML.
func TestGPUServesTheThermalSamplersReading(t *testing.T) {
	d := gputest.GB10(0)
	client := gpu.New(gpu.Options{NVML: gputest.Library(d), RetryMin: time.Hour})
	t.Cleanup(func() { client.Close() })
	sampler := newThermalCollector(deadlineSource{client, time.Second}, func() {}, oneMinute(), "", nopLogger())
	sampler.sample(context.Background(), time.Now())
	reads := func() int { return len(d.GetPowerUsageCalls()) }
	if reads() != 1 {
		t.Fatalf("%d power reads after one sample", reads())
	}

	cached, err := newGPUCollector(client, time.Second, time.Hour, fixtures, func() {}, nopLogger())
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

	uncached, err := newGPUCollector(client, time.Second, 0, fixtures, func() {}, nopLogger())
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

func TestParseMaxAge(t *testing.T) {
	for in, want := range map[string]time.Duration{"5s": 5 * time.Second, "0": 0, "0s": 0, "1m": time.Minute} {
		if got, err := parseMaxAge(in); err != nil || got != want {
			t.Errorf("%q: %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"-1s", "soon", ""} {
		if _, err := parseMaxAge(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
	app := kingpin.New("t", "")
	AddFlags(app)
	t.Cleanup(func() { setNVMLFlags(nil, nil) })
	if _, err := app.Parse([]string{"--gpu.max-age=-5s"}); err == nil || !strings.Contains(err.Error(), "--gpu.max-age") {
		t.Errorf("error %v does not name --gpu.max-age", err)
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
