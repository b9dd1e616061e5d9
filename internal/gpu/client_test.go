package gpu

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/go-kit/log"

	"github.com/spark-exporter/spark_exporter/internal/gpu/readings"
	"github.com/spark-exporter/spark_exporter/internal/testing/gputest"
	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
)

const gib = gputest.GiB

var (
	gb10     = gputest.GB10
	fakeNVML = gputest.Library
)

func newTestClient(t *testing.T, lib nvml.Interface, logger log.Logger) *Client {
	t.Helper()
	if logger == nil {
		logger = log.NewNopLogger()
	}
	c := New(Options{NVML: lib, Logger: logger, RetryMin: time.Millisecond, RetryMax: 10 * time.Millisecond})
	t.Cleanup(func() { c.Close() })
	return c
}

func snapshot(t *testing.T, c *Client) (readings.Snapshot, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return c.Snapshot(ctx)
}

func TestReadsWhatGB10Answers(t *testing.T) {
	c := newTestClient(t, fakeNVML(gb10(0)), nil)
	if !c.Up() {
		t.Fatal("not up after New on a working library")
	}
	snap, err := snapshot(t, c)
	if err != nil {
		t.Fatal(err)
	}
	if snap.DriverVersion != "580.95.05" || snap.CUDADriverVersion != "13.0" || len(snap.Devices) != 1 {
		t.Fatalf("snapshot = %+v", snap)
	}
	r := snap.Devices[0]
	if r.UUID != "GPU-test-0" || r.Name != "NVIDIA GB10" || r.ComputeCapability != "12.1" || r.Index != 0 {
		t.Errorf("identity = %q %q %q %d", r.UUID, r.Name, r.ComputeCapability, r.Index)
	}
	for name, tc := range map[string]struct {
		got  *float64
		want float64
	}{
		"temperature": {r.TemperatureCelsius, 87},
		"power":       {r.PowerWatts, 100.25},       // mW
		"energy":      {r.EnergyJoules, 123456.789}, // mJ
		"sm clock":    {r.SMClockHertz, 1980e6},
		"sm max":      {r.SMClockMaxHertz, 3003e6},
		"utilization": {r.Utilization, 0.98},
	} {
		if tc.got == nil || *tc.got != tc.want {
			t.Errorf("%s = %v, want %v", name, deref(tc.got), tc.want)
		}
	}
	if r.ClockEventReasons == nil || *r.ClockEventReasons != 4|32 {
		t.Errorf("reasons = %v", r.ClockEventReasons)
	}
	if r.MemoryTotalBytes != nil || r.MemoryUsedBytes != nil || r.PowerLimitWatts != nil {
		t.Error("memory info or power limit present though NOT_SUPPORTED")
	}
	wantSupport := map[readings.Field]bool{
		readings.FieldMemoryInfo: false, readings.FieldPowerLimit: false, readings.FieldEnergy: true, readings.FieldTemperature: true,
		readings.FieldPower: true, readings.FieldSMClock: true, readings.FieldUtilization: true, readings.FieldClocksEventReasons: true, readings.FieldProcesses: true,
		readings.FieldClocksEventCounters: true, readings.FieldTemperatureMargin: true, readings.FieldPerformanceState: true,
	}
	if fmt.Sprint(r.Supported) != fmt.Sprint(wantSupport) {
		t.Errorf("supported = %v, want %v", r.Supported, wantSupport)
	}
	if fmt.Sprint(r.Processes) != fmt.Sprint([]readings.Process{{PID: 4101, UsedBytes: 41 * gib}, {PID: 4102, UsedBytes: 30 * gib}}) {
		t.Errorf("processes = %v", r.Processes)
	}
	// nanoseconds as seconds, every reason of ClockEvents.
	wantSeconds := map[string]float64{"sw_power_cap": 10800.240649, "sync_boost": 0,
		"sw_thermal_slowdown": 0.903158, "hw_thermal_slowdown": 1.195386, "hw_power_brake_slowdown": 0}
	if fmt.Sprint(r.ClockEventSeconds) != fmt.Sprint(wantSeconds) {
		t.Errorf("clock event seconds = %v, want %v", r.ClockEventSeconds, wantSeconds)
	}
	if r.TemperatureMarginCelsius == nil || *r.TemperatureMarginCelsius != 13 {
		t.Errorf("margin = %v, want 13", deref(r.TemperatureMarginCelsius))
	}
	if r.PerformanceState == nil || *r.PerformanceState != 0 {
		t.Errorf("P-state = %v, want 0", r.PerformanceState)
	}
}

// Each clock event counter has its own answer: one an older driver does
// not know is left out, the others kept; none answered is "not
// supported", a counter failing otherwise fails the read.
func TestClockEventCountersOneByOne(t *testing.T) {
	answer := func(rets map[uint32]nvml.Return) func([]nvml.FieldValue) nvml.Return {
		return func(values []nvml.FieldValue) nvml.Return {
			for i := range values {
				values[i].NvmlReturn = uint32(rets[values[i].FieldId])
				values[i].ValueType = uint32(nvml.VALUE_TYPE_UNSIGNED_LONG_LONG)
				values[i].Value = [8]byte{0, 0x94, 0x35, 0x77} // 2e9 ns, little-endian
			}
			return nvml.SUCCESS
		}
	}
	old := map[uint32]nvml.Return{74: nvml.SUCCESS, 76: nvml.SUCCESS,
		269: nvml.ERROR_INVALID_ARGUMENT, 270: nvml.ERROR_NOT_SUPPORTED, 271: nvml.ERROR_NOT_SUPPORTED}
	d := gb10(0)
	d.GetFieldValuesFunc = answer(old)
	snap, err := snapshot(t, newTestClient(t, fakeNVML(d), nil))
	if err != nil {
		t.Fatal(err)
	}
	r := snap.Devices[0]
	if fmt.Sprint(r.ClockEventSeconds) != fmt.Sprint(map[string]float64{"sw_power_cap": 2, "sync_boost": 2}) || !r.Supported[readings.FieldClocksEventCounters] {
		t.Errorf("older driver: seconds %v, supported %v", r.ClockEventSeconds, r.Supported[readings.FieldClocksEventCounters])
	}

	none := map[uint32]nvml.Return{}
	for _, e := range readings.ClockEvents {
		none[e.FieldID] = nvml.ERROR_NOT_SUPPORTED
	}
	d = gb10(0)
	d.GetFieldValuesFunc = answer(none)
	snap, err = snapshot(t, newTestClient(t, fakeNVML(d), nil))
	if err != nil {
		t.Fatal(err)
	}
	if r := snap.Devices[0]; r.ClockEventSeconds != nil || r.Supported[readings.FieldClocksEventCounters] {
		t.Errorf("no counter answered: seconds %v, supported %v", r.ClockEventSeconds, r.Supported[readings.FieldClocksEventCounters])
	}

	lost := map[uint32]nvml.Return{74: nvml.SUCCESS, 76: nvml.SUCCESS, 269: nvml.ERROR_UNKNOWN}
	d = gb10(0)
	d.GetFieldValuesFunc = answer(lost)
	if _, err := snapshot(t, newTestClient(t, fakeNVML(d), nil)); err == nil || !strings.Contains(err.Error(), "nvmlDeviceGetFieldValues(269)") {
		t.Errorf("a counter failing with UNKNOWN: error %v, want one naming field 269", err)
	}
}

func deref(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

// A lost GPU is an error, not a gap: the read fails with NVML's code, and
// the other devices are still read.
func TestGPULostIsAnError(t *testing.T) {
	lost := gb10(1)
	lost.GetPowerUsageFunc = func() (uint32, nvml.Return) { return 0, nvml.ERROR_GPU_IS_LOST }
	lost.GetTotalEnergyConsumptionFunc = func() (uint64, nvml.Return) { return 0, nvml.ERROR_GPU_IS_LOST }
	c := newTestClient(t, fakeNVML(gb10(0), lost), nil)
	snap, err := snapshot(t, c)
	var nerr *callError
	if !errors.As(err, &nerr) || nerr.Return != nvml.ERROR_GPU_IS_LOST {
		t.Fatalf("error = %v, want GPU_IS_LOST", err)
	}
	if !strings.Contains(err.Error(), "gpu 1: nvmlDeviceGetPowerUsage") {
		t.Errorf("error %q does not say which device and call", err)
	}
	if len(snap.Devices) != 2 || snap.Devices[0].PowerWatts == nil {
		t.Fatalf("healthy device not reported beside the lost one: %+v", snap.Devices)
	}
	r := snap.Devices[1]
	if r.PowerWatts != nil || r.EnergyJoules != nil {
		t.Error("a failed field has a value")
	}
	if _, ok := r.Supported[readings.FieldPower]; ok {
		t.Error("a failed field is reported as supported or not; it should be unknown")
	}
	if r.TemperatureCelsius == nil {
		t.Error("a field that answered was dropped")
	}
	if !c.Up() {
		t.Error("a lost GPU took NVML down")
	}
}

// The process list changed between NVML's sizing call and its fetch:
// INSUFFICIENT_SIZE fails this read (no list, no "unsupported"); the
// other fields are kept.
func TestInsufficientSizeFailsTheRead(t *testing.T) {
	d := gb10(0)
	d.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.ERROR_INSUFFICIENT_SIZE }
	c := newTestClient(t, fakeNVML(d), nil)
	snap, err := snapshot(t, c)
	var nerr *callError
	if !errors.As(err, &nerr) || nerr.Return != nvml.ERROR_INSUFFICIENT_SIZE {
		t.Fatalf("error = %v, want INSUFFICIENT_SIZE", err)
	}
	r := snap.Devices[0]
	if r.Processes != nil {
		t.Errorf("processes = %v after a failed call", r.Processes)
	}
	if _, ok := r.Supported[readings.FieldProcesses]; ok {
		t.Error("processes marked supported or unsupported after a failed call")
	}
	if r.TemperatureCelsius == nil || r.PowerWatts == nil {
		t.Error("fields that answered were dropped")
	}
}

// A device that answers only some fields: the rest are absent and
// unsupported, and that is no error.
func TestPartialSupport(t *testing.T) {
	notSupported := func() (uint32, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
	d := gb10(0)
	d.GetPowerUsageFunc = notSupported
	d.GetTotalEnergyConsumptionFunc = func() (uint64, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
	d.GetClockInfoFunc = func(nvml.ClockType) (uint32, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
	d.GetMaxClockInfoFunc = nil // must not be asked once the clock is unsupported
	d.GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{}, nvml.ERROR_NOT_SUPPORTED }
	d.GetCurrentClocksEventReasonsFunc = func() (uint64, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
	d.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.ERROR_NOT_SUPPORTED }
	d.GetFieldValuesFunc = func([]nvml.FieldValue) nvml.Return { return nvml.ERROR_NOT_SUPPORTED }
	d.GetMarginTemperatureFunc = func() (nvml.MarginTemperature, nvml.Return) {
		return nvml.MarginTemperature{}, nvml.ERROR_NOT_SUPPORTED
	}
	d.GetPerformanceStateFunc = func() (nvml.Pstates, nvml.Return) { return nvml.PSTATE_UNKNOWN, nvml.ERROR_NOT_SUPPORTED }
	c := newTestClient(t, fakeNVML(d), nil)
	snap, err := snapshot(t, c)
	if err != nil {
		t.Fatal(err)
	}
	r := snap.Devices[0]
	if r.TemperatureCelsius == nil {
		t.Fatal("temperature missing")
	}
	if r.PowerWatts != nil || r.EnergyJoules != nil || r.SMClockHertz != nil || r.SMClockMaxHertz != nil ||
		r.Utilization != nil || r.ClockEventReasons != nil || r.Processes != nil ||
		r.ClockEventSeconds != nil || r.TemperatureMarginCelsius != nil || r.PerformanceState != nil {
		t.Errorf("unsupported fields have values: %+v", r)
	}
	for _, f := range readings.Fields {
		if want := f == readings.FieldTemperature; r.Supported[f] != want {
			t.Errorf("supported[%s] = %v, want %v", f, r.Supported[f], want)
		}
		if _, asked := r.Supported[f]; !asked {
			t.Errorf("field %s not reported", f)
		}
	}
}

// A patched driver that answers memory info is exported as it says.
func TestMemoryInfoWhenAnswered(t *testing.T) {
	d := gb10(0)
	d.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) {
		return nvml.Memory_v2{Total: 128027983872, Used: 42 * gib, Free: 128027983872 - 42*gib}, nvml.SUCCESS
	}
	d.GetEnforcedPowerLimitFunc = func() (uint32, nvml.Return) { return 240000, nvml.SUCCESS }
	c := newTestClient(t, fakeNVML(d), nil)
	snap, err := snapshot(t, c)
	if err != nil {
		t.Fatal(err)
	}
	r := snap.Devices[0]
	if r.MemoryTotalBytes == nil || *r.MemoryTotalBytes != 128027983872 || *r.MemoryUsedBytes != 42*gib || !r.Supported[readings.FieldMemoryInfo] {
		t.Errorf("memory = %v / %v", r.MemoryTotalBytes, r.MemoryUsedBytes)
	}
	if r.PowerLimitWatts == nil || *r.PowerLimitWatts != 240 {
		t.Errorf("power limit = %v", r.PowerLimitWatts)
	}
}

// NVML lists a pid once per MIG instance: one process, summed. A pid
// whose memory is NVML_VALUE_NOT_AVAILABLE is left out, not zero.
func TestProcessesSummedPerPid(t *testing.T) {
	d := gb10(0)
	d.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
		return []nvml.ProcessInfo{
			{Pid: 4101, UsedGpuMemory: 1 * gib, GpuInstanceId: 1},
			{Pid: 4102, UsedGpuMemory: notAvailable},
			{Pid: 4101, UsedGpuMemory: 2 * gib, GpuInstanceId: 2},
			{Pid: 4103, UsedGpuMemory: 0},
		}, nvml.SUCCESS
	}
	c := newTestClient(t, fakeNVML(d), nil)
	snap, err := snapshot(t, c)
	if err != nil {
		t.Fatal(err)
	}
	want := []readings.Process{{PID: 4101, UsedBytes: 3 * gib}, {PID: 4103, UsedBytes: 0}}
	if got := snap.Devices[0].Processes; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("processes = %v, want %v", got, want)
	}

	// Supported with nothing running: an empty list, not nil.
	d.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) { return nil, nvml.SUCCESS }
	snap, err = snapshot(t, c)
	if err != nil {
		t.Fatal(err)
	}
	if p := snap.Devices[0].Processes; p == nil || len(p) != 0 {
		t.Errorf("processes = %#v, want an empty list", p)
	}
}

// A driver older than the newer entry points gets the older ones, and the
// newer ones are never called (they would kill the process).
func TestOlderDriverFallbacks(t *testing.T) {
	d := gb10(0)
	d.GetCurrentClocksEventReasonsFunc = nil
	d.GetCurrentClocksThrottleReasonsFunc = func() (uint64, nvml.Return) { return nvml.ClocksThrottleReasonHwThermalSlowdown, nvml.SUCCESS }
	d.GetMemoryInfo_v2Func = nil
	d.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) { return nvml.Memory{Total: 80 * gib, Used: gib}, nvml.SUCCESS }
	lib := fakeNVML(d)
	lib.SystemGetCudaDriverVersion_v2Func = nil
	lib.SystemGetCudaDriverVersionFunc = func() (int, nvml.Return) { return 12020, nvml.SUCCESS }
	lib.ExtensionsFunc = func() nvml.ExtendedInterface {
		return &mock.ExtendedInterface{LookupSymbolFunc: func(string) error { return errors.New("undefined symbol") }}
	}
	c := newTestClient(t, lib, nil)
	snap, err := snapshot(t, c)
	if err != nil {
		t.Fatal(err)
	}
	r := snap.Devices[0]
	if snap.CUDADriverVersion != "12.2" || r.ClockEventReasons == nil || *r.ClockEventReasons != 64 || r.MemoryTotalBytes == nil || *r.MemoryTotalBytes != 80*gib {
		t.Errorf("cuda %q reasons %v memory %v", snap.CUDADriverVersion, r.ClockEventReasons, r.MemoryTotalBytes)
	}
}

// A wedged driver call: every read returns by its deadline, the stuck call
// holds one goroutine however many reads come, and readings resume when the
// call returns.
func TestWedgedCallDoesNotPileUp(t *testing.T) {
	d := gb10(0)
	var wedged atomic.Bool
	release := make(chan struct{})
	var once sync.Once
	d.GetPowerUsageFunc = func() (uint32, nvml.Return) {
		if wedged.Load() {
			<-release
		}
		return 99000, nvml.SUCCESS
	}
	c := newTestClient(t, fakeNVML(d), nil)
	defer once.Do(func() { close(release) })
	if _, err := snapshot(t, c); err != nil {
		t.Fatal(err)
	}

	wedged.Store(true)
	read := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		_, err := c.Snapshot(ctx)
		return err
	}
	if err := read(); !errors.Is(err, ErrTimeout) {
		t.Fatalf("read during the hang: %v, want ErrTimeout", err)
	}
	before := runtime.NumGoroutine()
	for range 20 {
		if err := read(); !errors.Is(err, ErrTimeout) {
			t.Fatalf("read during the hang: %v, want ErrTimeout", err)
		}
	}
	if after := runtime.NumGoroutine(); after > before+2 {
		t.Errorf("goroutines grew from %d to %d over 20 reads during the hang", before, after)
	}

	wedged.Store(false)
	once.Do(func() { close(release) })
	snap, err := snapshot(t, c)
	if err != nil {
		t.Fatalf("no reading after the call returned: %v", err)
	}
	if p := snap.Devices[0].PowerWatts; p == nil || *p != 99 {
		t.Errorf("power after the hang = %v", deref(p))
	}
}

// A call wedged in the driver: Stalled counts its wait on the client's
// clock, through reads that give up at their deadline, and is 0 again once
// the driver answers.
func TestStalledCountsTheWedgedCall(t *testing.T) {
	d := gb10(0)
	var wedged atomic.Bool
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	d.GetPowerUsageFunc = func() (uint32, nvml.Return) {
		if wedged.Load() {
			select {
			case entered <- struct{}{}:
			default:
			}
			<-release
		}
		return 99000, nvml.SUCCESS
	}
	c, clk := newClockedClient(t, fakeNVML(d))
	unwedge := sync.OnceFunc(func() { close(release) })
	t.Cleanup(unwedge)
	if _, err := snapshot(t, c); err != nil {
		t.Fatal(err)
	}
	if got := c.Stalled(); got != 0 {
		t.Fatalf("Stalled = %v with no call outstanding, want 0", got)
	}

	wedged.Store(true)
	read := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		_, err := c.Snapshot(ctx)
		return err
	}
	if err := read(); !errors.Is(err, ErrTimeout) {
		t.Fatalf("read during the hang: %v, want ErrTimeout", err)
	}
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the wedged call never started")
	}
	clk.advance(9 * time.Minute)
	if got := c.Stalled(); got != 9*time.Minute {
		t.Errorf("Stalled = %v nine minutes into the hang", got)
	}
	if err := read(); !errors.Is(err, ErrTimeout) {
		t.Fatalf("read during the hang: %v, want ErrTimeout", err)
	}
	clk.advance(time.Minute)
	if got := c.Stalled(); got != 10*time.Minute {
		t.Errorf("Stalled = %v after another read and a minute, want the first call's 10m", got)
	}

	wedged.Store(false)
	unwedge()
	if _, err := snapshot(t, c); err != nil {
		t.Fatalf("no reading after the call returned: %v", err)
	}
	eventually(t, "Stalled back to 0 once the driver answered", func() bool { return c.Stalled() == 0 })
}

// eventually polls cond until it holds or a generous deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(2 * time.Millisecond) // polling interval, not synchronisation
	}
}

// Without a driver the client is down, says so once, and comes up by
// itself when the driver appears.
func TestInitialisationRetried(t *testing.T) {
	var driverLoaded atomic.Bool
	lib := fakeNVML(gb10(0))
	lib.InitFunc = func() nvml.Return {
		if !driverLoaded.Load() {
			return nvml.ERROR_DRIVER_NOT_LOADED
		}
		return nvml.SUCCESS
	}
	var logs testexporter.SyncBuffer
	c := newTestClient(t, lib, log.NewLogfmtLogger(&logs))
	if c.Up() {
		t.Fatal("up without a driver")
	}
	if _, err := snapshot(t, c); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("read without a driver: %v, want ErrUnavailable", err)
	}
	eventually(t, "several attempts", func() bool { return len(lib.InitCalls()) >= 3 })
	if n := strings.Count(logs.String(), "NVML unavailable"); n != 1 {
		t.Errorf("the unavailability was logged %d times, want once:\n%s", n, logs.String())
	}

	driverLoaded.Store(true)
	eventually(t, "NVML up after the driver loaded", c.Up)
	if _, err := snapshot(t, c); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "NVML initialised") {
		t.Errorf("recovery not logged:\n%s", logs.String())
	}
}

// driverThatGoes is a GB10 whose driver goes away while gone holds: reads
// answer UNINITIALIZED and initialisation DRIVER_NOT_LOADED.
func driverThatGoes(gone *atomic.Bool) (*mock.Device, *mock.Interface) {
	d := gb10(0)
	d.GetPowerUsageFunc = func() (uint32, nvml.Return) {
		if gone.Load() {
			return 0, nvml.ERROR_UNINITIALIZED
		}
		return 99000, nvml.SUCCESS
	}
	lib := fakeNVML(d)
	lib.InitFunc = func() nvml.Return {
		if gone.Load() {
			return nvml.ERROR_DRIVER_NOT_LOADED
		}
		return nvml.SUCCESS
	}
	return d, lib
}

// A read that finds the driver gone (unloaded, upgraded) takes the client
// down and starts initialisation again.
func TestDriverGoneReinitialises(t *testing.T) {
	var gone atomic.Bool
	_, lib := driverThatGoes(&gone)
	c := newTestClient(t, lib, nil)
	gone.Store(true)
	if _, err := snapshot(t, c); err == nil {
		t.Fatal("no error when the driver went away")
	}
	if c.Up() {
		t.Error("still up after the driver went away")
	}
	if _, err := snapshot(t, c); !errors.Is(err, ErrUnavailable) {
		t.Errorf("read while down: %v, want ErrUnavailable", err)
	}
	gone.Store(false)
	eventually(t, "NVML up again", c.Up)
	if len(lib.InitCalls()) < 2 {
		t.Errorf("Init called %d times", len(lib.InitCalls()))
	}
}

// No library at all: down, a read says unavailable, the log names no path.
func TestNoLibrary(t *testing.T) {
	var logs testexporter.SyncBuffer
	c := New(Options{Library: "/nonexistent/secret-dir/libnvidia-ml.so.1", Logger: log.NewLogfmtLogger(&logs), RetryMin: time.Hour})
	defer c.Close()
	if c.Up() {
		t.Fatal("up without a library")
	}
	if _, err := snapshot(t, c); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("read: %v, want ErrUnavailable", err)
	}
	eventually(t, "the unavailability logged", func() bool { return strings.Contains(logs.String(), "NVML unavailable") })
	if strings.Contains(logs.String(), "secret-dir") {
		t.Errorf("the log names the library path:\n%s", logs.String())
	}
}

func TestCloseShutsDownOnce(t *testing.T) {
	lib := fakeNVML(gb10(0))
	c := New(Options{NVML: lib})
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(lib.ShutdownCalls()); n != 1 {
		t.Errorf("Shutdown called %d times, want 1", n)
	}
	if c.Up() {
		t.Error("up after Close")
	}
	if _, err := snapshot(t, c); !errors.Is(err, ErrUnavailable) {
		t.Errorf("read after Close: %v", err)
	}
}

// Close returns even when the worker is stuck in the driver.
func TestCloseWhileWedged(t *testing.T) {
	d := gb10(0)
	release := make(chan struct{})
	defer close(release)
	var wedged atomic.Bool
	d.GetPowerUsageFunc = func() (uint32, nvml.Return) {
		if wedged.Load() {
			<-release
		}
		return 1000, nvml.SUCCESS
	}
	c := New(Options{NVML: fakeNVML(d), InitTimeout: 50 * time.Millisecond})
	wedged.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := c.Snapshot(ctx); !errors.Is(err, ErrTimeout) {
		t.Fatalf("read: %v", err)
	}
	if err := c.Close(); err == nil {
		t.Error("Close reported success though NVML could not be shut down")
	}
}

// A driver older than nvmlDeviceGetMarginTemperature and
// nvmlDeviceGetFieldValues: neither is called (go-nvml would kill the
// process on a missing symbol), and both fields read unsupported.
func TestOlderDriverWithoutMarginOrFieldValues(t *testing.T) {
	d := gb10(0)
	d.GetMarginTemperatureFunc = nil // a call would panic the mock
	d.GetFieldValuesFunc = nil
	lib := fakeNVML(d)
	lib.ExtensionsFunc = func() nvml.ExtendedInterface {
		return &mock.ExtendedInterface{LookupSymbolFunc: func(s string) error {
			switch s {
			case "nvmlDeviceGetTemperatureV", "nvmlDeviceGetMarginTemperature", "nvmlDeviceGetFieldValues":
				return errors.New("undefined symbol")
			}
			return nil
		}}
	}
	snap, err := snapshot(t, newTestClient(t, lib, nil))
	if err != nil {
		t.Fatal(err)
	}
	r := snap.Devices[0]
	for _, f := range []readings.Field{readings.FieldTemperatureMargin, readings.FieldClocksEventCounters} {
		if supported, asked := r.Supported[f]; !asked || supported {
			t.Errorf("%s: supported %v (reported %v), want reported unsupported", f, supported, asked)
		}
	}
	if r.TemperatureMarginCelsius != nil || r.ClockEventSeconds != nil {
		t.Errorf("values without the entry points: margin %v, counters %v", deref(r.TemperatureMarginCelsius), r.ClockEventSeconds)
	}
}

// The reasons' bits are NVML's.
func TestClockEventReasonBits(t *testing.T) {
	want := map[string]uint64{
		"gpu_idle": nvml.ClocksEventReasonGpuIdle, "applications_clocks_setting": nvml.ClocksEventReasonApplicationsClocksSetting,
		"sw_power_cap": nvml.ClocksEventReasonSwPowerCap, "hw_slowdown": nvml.ClocksThrottleReasonHwSlowdown,
		"sync_boost": nvml.ClocksEventReasonSyncBoost, "sw_thermal_slowdown": nvml.ClocksEventReasonSwThermalSlowdown,
		"hw_thermal_slowdown": nvml.ClocksThrottleReasonHwThermalSlowdown, "hw_power_brake_slowdown": nvml.ClocksThrottleReasonHwPowerBrakeSlowdown,
		"display_clock_setting": nvml.ClocksEventReasonDisplayClockSetting,
	}
	if len(readings.ClockEventReasons) != len(want) {
		t.Errorf("%d reasons, want %d", len(readings.ClockEventReasons), len(want))
	}
	for _, r := range readings.ClockEventReasons {
		if bit, ok := want[r.Name]; !ok || bit != r.Bit {
			t.Errorf("%s: bit %#x, NVML's is %#x", r.Name, r.Bit, bit)
		}
	}
}
