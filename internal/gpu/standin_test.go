package gpu

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/gpu/readings"
	"github.com/spark-exporter/spark_exporter/internal/testing/standin"
	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
)

// These tests load the GB10 stand-in library through go-nvml's real dlopen
// path, in this test process. go-nvml binds NVML's symbols process-wide,
// so every test here uses the same library file.

// The library answers what its scenario model says, through go-nvml.
func TestStandInAnswersItsScenario(t *testing.T) {
	lib := testexporter.StandInNVML(t)
	scenario := testexporter.Scenario(t, "gb10-throttle")
	t.Setenv("SPARK_NVML_SCENARIO", scenario)
	t.Setenv("SPARK_NVML_FREEZE", "45m")
	c := New(Options{Library: lib})
	defer c.Close()
	if !c.Up() {
		t.Fatal("the stand-in did not initialise")
	}
	snap, err := snapshot(t, c)
	if err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(scenario)
	if err != nil {
		t.Fatal(err)
	}
	want, err := standin.Evaluate(text, 0, 45*60)
	if err != nil {
		t.Fatal(err)
	}
	if snap.DriverVersion != "580.95.05" || snap.CUDADriverVersion != "13.0" || len(snap.Devices) != 1 {
		t.Fatalf("snapshot = %+v", snap)
	}
	r := snap.Devices[0]
	if r.Name != "NVIDIA GB10" || r.ComputeCapability != "12.1" || r.UUID == "" {
		t.Errorf("identity %q %q %q", r.Name, r.ComputeCapability, r.UUID)
	}
	for name, tc := range map[string]struct {
		got  *float64
		want float64
	}{
		"temperature": {r.TemperatureCelsius, math.Round(want.Temperature)},
		"power":       {r.PowerWatts, math.Round(want.Power*1000) / 1000},
		"energy":      {r.EnergyJoules, math.Round(want.EnergyJoules*1000) / 1000},
		"sm clock":    {r.SMClockHertz, math.Round(want.SMClock) * 1e6},
		"sm max":      {r.SMClockMaxHertz, 3003e6},
		"utilization": {r.Utilization, math.Round(want.Utilization) / 100},
	} {
		if tc.got == nil || math.Abs(*tc.got-tc.want) > 1e-9*math.Abs(tc.want) {
			t.Errorf("%s = %v, want %v", name, deref(tc.got), tc.want)
		}
	}
	if r.ClockEventReasons == nil || *r.ClockEventReasons != want.Reasons {
		t.Errorf("reasons = %v, want %b", r.ClockEventReasons, want.Reasons)
	}
	// The counters, through nvmlDeviceGetFieldValues: nanoseconds, read
	// as seconds.
	for _, e := range readings.ClockEvents {
		got, ok := r.ClockEventSeconds[e.Name]
		if w := math.Round(want.EventSeconds[e.FieldID]*1e9) / 1e9; !ok || math.Abs(got-w) > 1e-9 {
			t.Errorf("%s counter = %v (present %v), want %v s", e.Name, got, ok, w)
		}
	}
	if r.ClockEventSeconds["sw_thermal_slowdown"] <= 0 || *r.ClockEventReasons&(1<<5) != 0 {
		t.Errorf("at 45m the driver slows for heat with its flag clear: counter %v, flags %#x",
			r.ClockEventSeconds["sw_thermal_slowdown"], *r.ClockEventReasons)
	}
	if m := r.TemperatureMarginCelsius; m == nil || *m != math.Round(want.MarginCelsius) {
		t.Errorf("margin = %v, want %v", deref(m), math.Round(want.MarginCelsius))
	}
	if p := r.PerformanceState; p == nil || *p != want.PState {
		t.Errorf("P-state = %v, want %d", p, want.PState)
	}
	// Three processes: go-nvml's first call offers room for one, so the
	// library's INSUFFICIENT_SIZE protocol is exercised too.
	if len(r.Processes) != 3 || len(want.Processes) != 3 {
		t.Fatalf("processes = %v, want %v", r.Processes, want.Processes)
	}
	for i, p := range want.Processes {
		if r.Processes[i] != (readings.Process{PID: p.PID, UsedBytes: p.Used}) {
			t.Errorf("process %d = %v, want %v", i, r.Processes[i], p)
		}
	}
	if r.MemoryTotalBytes != nil || r.PowerLimitWatts != nil || r.Supported[readings.FieldMemoryInfo] || r.Supported[readings.FieldPowerLimit] {
		t.Error("the GB10 stand-in answered memory info or the power limit")
	}
}

// Initialisation fails while a file exists and succeeds once it is gone;
// a hang while another file exists makes reads time out without piling up
// goroutines, and readings resume when it ends.
func TestStandInInitFailureAndHang(t *testing.T) {
	lib := testexporter.StandInNVML(t)
	dir := t.TempDir()
	initFail, hang := filepath.Join(dir, "no-driver"), filepath.Join(dir, "wedged")
	scenario := filepath.Join(dir, "test.scenario")
	text := "init_fail file " + initFail + "\nhang file " + hang + "\nat 0 temp=50 power=60\n"
	if err := os.WriteFile(scenario, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(initFail, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SPARK_NVML_SCENARIO", scenario)
	c := New(Options{Library: lib, RetryMin: time.Millisecond, RetryMax: 20 * time.Millisecond})
	defer c.Close()
	if c.Up() {
		t.Fatal("up while the driver is not loaded")
	}
	os.Remove(initFail)
	eventually(t, "NVML up once the driver loads", c.Up)

	if err := os.WriteFile(hang, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	read := func(d time.Duration) (readings.Snapshot, error) {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		return c.Snapshot(ctx)
	}
	if _, err := read(50 * time.Millisecond); !errors.Is(err, ErrTimeout) {
		t.Fatalf("read during the hang: %v, want ErrTimeout", err)
	}
	before := runtime.NumGoroutine()
	for range 10 {
		if _, err := read(20 * time.Millisecond); !errors.Is(err, ErrTimeout) {
			t.Fatalf("read during the hang: %v", err)
		}
	}
	if after := runtime.NumGoroutine(); after > before+2 {
		t.Errorf("goroutines grew from %d to %d during the hang", before, after)
	}
	os.Remove(hang)
	var snap readings.Snapshot
	eventually(t, "readings after the hang", func() bool {
		var err error
		snap, err = read(time.Second)
		return err == nil
	})
	if p := snap.Devices[0].PowerWatts; p == nil || *p != 60 {
		t.Errorf("power after the hang = %v", deref(p))
	}
}
