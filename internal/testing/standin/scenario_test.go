package standin

import (
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const scenarios = "../../../testdata/nvml/scenarios"

// githubSource is a public thread named as owner/repo.
var githubSource = regexp.MustCompile(`\b[A-Za-z0-9][A-Za-z0-9-]*/[A-Za-z0-9][A-Za-z0-9_.-]*[A-Za-z0-9]\b`)

func TestShippedScenariosParse(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(scenarios, "*.scenario"))
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range files {
		names[strings.TrimSuffix(filepath.Base(f), ".scenario")] = true
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := CheckScenario(text); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	for _, want := range []string{"gb10-idle", "gb10-throttle", "gb10-patched-meminfo", "multi-gpu", "hang", "init-fails"} {
		if !names[want] {
			t.Errorf("scenario %s missing from %s", want, scenarios)
		}
	}
}

// The scenarios built from real units' captures name where the figures
// come from, in the comment that opens the file: a public GitHub thread
// (owner/repo) and the section of docs/design.md that collects it.
func TestCaptureScenariosNameTheirSource(t *testing.T) {
	for _, name := range []string{"gb10-idle", "gb10-sustained-load", "gb10-throttle", "gb10-usb-pd-stuck", "gb10-memory-bound-decode",
		"gb10-warmup-flat-90w", "gb10-steady-88c", "gb10-counter-blips", "gb10-clock-falls-flat-power", "gb10-heat-soak-after-serving"} {
		text, err := os.ReadFile(filepath.Join(scenarios, name+".scenario"))
		if err != nil {
			t.Error(err)
			continue
		}
		var header strings.Builder
		for _, line := range strings.Split(string(text), "\n") {
			if !strings.HasPrefix(line, "#") {
				break
			}
			header.WriteString(line + "\n")
		}
		h := strings.Join(strings.Fields(strings.ReplaceAll(header.String(), "#", " ")), " ")
		if !strings.Contains(h, `docs/design.md`) || !githubSource.MatchString(strings.ReplaceAll(h, "docs/design.md", "")) {
			t.Errorf("%s: the opening comment does not name the capture it reproduces (a public owner/repo thread and docs/design.md):\n%s", name, header.String())
		}
	}
}

func TestScenarioErrorsNameTheLine(t *testing.T) {
	for _, tc := range []struct{ text, want string }{
		{"bogus 1", "line 1: unknown directive bogus"},
		{"\n\nat 1m temp=hot", "line 3: bad number hot for temp"},
		{"at 10m temp=50\nat 5m temp=60", "line 2: time 5m is not after the previous point"},
		{"at 0 temp=300", "temp 300 out of 0..200"},
		{"at 0 util=101", "util 101 out of 0..100"},
		{"at 0 reasons=gpu_idle,melting", "bad reasons"},
		{"at 0 reasons=gpu_idle,", "bad reasons"},
		{"at 0 flux=1", "unknown key flux"},
		{"at soon", "bad time soon"},
		{"at 1m30", "bad time 1m30"},
		{"at 0x10", "bad time"},
		{"at 0 temp=nan", "bad number nan"},
		{"at 0 power=1e400", "bad number"},
		{"at 0 power=0x1p3", "bad number"},
		{"devices 9", "devices 9 out of 0..8"},
		{"devices 1\ngpu 1\nat 0 temp=1", "a timeline for gpu 1, but only 1 devices"},
		{"process pid=1", "process needs pid= and used="},
		{"process pid=0 used=1", "bad pid 0"},
		{"process pid=4101 used=12GB", "bad size 12GB"},
		{"process pid=4101 used=1GiB from=5m to=2m", "ends before it starts"},
		{"gpu 0\ndevices 2", "line 2: devices belongs before the first gpu section"},
		{"cuda 13", "bad version 13"},
		{"speed 0", "speed 0 out of"},
		{"hang after", "hang takes"},
		{"init_fail sometimes", "init_fail takes"},
		{"lost after 5m", "lost takes"},
		{"unsupported fan", "unknown field fan"},
		{"name \x01", "printable"},
		{"name " + strings.Repeat("x", 200), "name longer than"},
		{"at 0\x00", "NUL byte"},
		{strings.Repeat("#", 2000), "line longer than"},
	} {
		err := CheckScenario([]byte(tc.text))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want it to contain %q", tc.text, err, tc.want)
		}
	}
}

const gib = 1 << 30

func TestScenarioModel(t *testing.T) {
	const text = `
devices 2
at 0    temp=40 power=10  sm=200  util=0  reasons=gpu_idle
at 100  temp=60 power=110 sm=2200 util=90 reasons=sw_power_cap,sw_thermal_slowdown
at 200  temp=80                            # power, sm, util carried forward
process pid=4101 used=1GiB from=50 to=150
process pid=4102 used=512MiB
gpu 1
at 0    temp=30 power=50
process pid=4103 used=2GiB
`
	for _, tc := range []struct {
		gpu   int
		t     float64
		want  State
		procs []Process
	}{
		// Halfway between points: numbers interpolate, reasons hold.
		{0, 50, State{Temperature: 50, Power: 60, SMClock: 1200, Utilization: 45, Reasons: 1, Holding: 1,
			EnergyJoules: (10 + 60) / 2.0 * 50}, []Process{{4101, gib}, {4102, 512 << 20}}},
		// GB10: the driver holds the clocks for the power cap and heat,
		// its flags read clear.
		{0, 100, State{Temperature: 60, Power: 110, SMClock: 2200, Utilization: 90, Reasons: 0, Holding: 4 | 32,
			EnergyJoules: (10 + 110) / 2.0 * 100}, []Process{{4101, gib}, {4102, 512 << 20}}},
		// Carried forward, then held after the last point.
		{0, 300, State{Temperature: 80, Power: 110, SMClock: 2200, Utilization: 90, Reasons: 0, Holding: 4 | 32,
			EnergyJoules: 6000 + 110*200}, []Process{{4102, 512 << 20}}},
		// A device with its own timeline: missing keys start from idle.
		{1, 60, State{Temperature: 30, Power: 50, SMClock: 208, Utilization: 0, Reasons: 1, Holding: 1,
			EnergyJoules: 50 * 60}, []Process{{4103, 2 * gib}}},
	} {
		got, err := Evaluate([]byte(text), tc.gpu, tc.t)
		if err != nil {
			t.Fatal(err)
		}
		tc.want.Devices = 2
		tc.want.Processes = tc.procs
		if !sameState(got, tc.want) {
			t.Errorf("gpu %d at %gs:\n got %+v\nwant %+v", tc.gpu, tc.t, got, tc.want)
		}
	}
	if _, err := Evaluate([]byte(text), 2, 0); err == nil {
		t.Error("evaluating a device the scenario does not have: no error")
	}
}

// The clock event counters integrate each reason's share of the time, the
// margin is temperature_limit less the temperature, the P-state holds;
// with clocks_event_flags reported the flags show what the driver does.
func TestScenarioCountersMarginPState(t *testing.T) {
	const text = `
temperature_limit 94
at 0    temp=40 pstate=8 reasons=gpu_idle
at 100  temp=81 pstate=0 reasons=sw_power_cap,sw_thermal_slowdown:0.25
at 200  reasons=sw_power_cap:0.5,hw_thermal_slowdown:0.1
at 300  reasons=none
`
	for _, tc := range []struct {
		t      float64
		want   map[uint32]float64
		margin float64
		pstate int
	}{
		{50, map[uint32]float64{74: 0, 76: 0, 269: 0, 270: 0, 271: 0}, 94 - 60.5, 8},
		{150, map[uint32]float64{74: 50, 76: 0, 269: 12.5, 270: 0, 271: 0}, 13, 0},
		{400, map[uint32]float64{74: 150, 76: 0, 269: 25, 270: 10, 271: 0}, 13, 0},
	} {
		got, err := Evaluate([]byte(text), 0, tc.t)
		if err != nil {
			t.Fatal(err)
		}
		for id, want := range tc.want {
			if math.Abs(got.EventSeconds[id]-want) > 1e-9 {
				t.Errorf("at %gs: counter %d = %g s, want %g", tc.t, id, got.EventSeconds[id], want)
			}
		}
		if math.Abs(got.MarginCelsius-tc.margin) > 1e-9 || got.PState != tc.pstate {
			t.Errorf("at %gs: margin %g, P%d; want %g, P%d", tc.t, got.MarginCelsius, got.PState, tc.margin, tc.pstate)
		}
		if got.Reasons&^1 != 0 {
			t.Errorf("at %gs: GB10 flags %#x, want the slowdown bits clear", tc.t, got.Reasons)
		}
	}
	got, err := Evaluate([]byte("clocks_event_flags reported\n"+text), 0, 150)
	if err != nil {
		t.Fatal(err)
	}
	if got.Reasons != 4|32 {
		t.Errorf("reported flags = %#x, want sw_power_cap|sw_thermal_slowdown", got.Reasons)
	}
	for _, bad := range []string{"at 0 reasons=sw_power_cap:0", "at 0 reasons=sw_power_cap:1.5", "at 0 reasons=sw_power_cap:", "at 0 pstate=16", "clocks_event_flags sometimes", "temperature_limit 0"} {
		if err := CheckScenario([]byte(bad)); err == nil {
			t.Errorf("%q parses", bad)
		}
	}
}

// Without a scenario the library is an idle GB10.
func TestDefaultIsIdleGB10(t *testing.T) {
	got, err := Evaluate(nil, 0, 1234)
	if err != nil {
		t.Fatal(err)
	}
	if got.Devices != 1 || got.Reasons != 1 || got.Utilization != 0 || got.Power <= 0 || got.Power > 10 || len(got.Processes) != 0 {
		t.Errorf("default scenario = %+v, want one idle device", got)
	}
}

func sameState(a, b State) bool {
	near := func(x, y float64) bool { return math.Abs(x-y) < 1e-9*math.Max(1, math.Abs(y)) }
	if a.Devices != b.Devices || a.Reasons != b.Reasons || a.Holding != b.Holding || len(a.Processes) != len(b.Processes) {
		return false
	}
	for i := range a.Processes {
		if a.Processes[i] != b.Processes[i] {
			return false
		}
	}
	return near(a.Temperature, b.Temperature) && near(a.Power, b.Power) && near(a.SMClock, b.SMClock) &&
		near(a.Utilization, b.Utilization) && near(a.EnergyJoules, b.EnergyJoules)
}

// FuzzScenario: any text parses or is refused with a line number, and a
// scenario that parses evaluates to values a device could report.
func FuzzScenario(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(scenarios, "*.scenario"))
	for _, file := range files {
		if text, err := os.ReadFile(file); err == nil {
			f.Add(text, 0.0)
		}
	}
	f.Add([]byte("at 1h30m temp=50 reasons=none\nprocess pid=1 used=1KiB to=1s"), 5400.0)
	f.Fuzz(func(t *testing.T, text []byte, at float64) {
		err := CheckScenario(text)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "line ") {
				t.Fatalf("error without a line: %v", err)
			}
			return
		}
		if math.IsNaN(at) || math.IsInf(at, 0) {
			at = 0
		}
		at = math.Mod(math.Abs(at), 1e7)
		s, err := Evaluate(text, 0, at)
		if err != nil {
			return // a scenario with no devices
		}
		for name, v := range map[string]float64{"temperature": s.Temperature, "power": s.Power, "sm": s.SMClock, "util": s.Utilization, "energy": s.EnergyJoules} {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				t.Fatalf("%s = %g at %gs", name, v, at)
			}
		}
		for id, secs := range s.EventSeconds {
			if math.IsNaN(secs) || secs < 0 || secs > at+1e-6 {
				t.Fatalf("counter %d = %g s at %gs: more than the time elapsed", id, secs, at)
			}
		}
		if s.Temperature > 200 || s.Utilization > 100 || s.Reasons >= 1<<9 || s.PState < 0 || s.PState > 15 || len(s.Processes) > 64 {
			t.Fatalf("state out of range: %+v", s)
		}
	})
}
