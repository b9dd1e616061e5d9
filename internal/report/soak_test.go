package report

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/judge"
	"github.com/spark-exporter/spark_exporter/internal/testing/standin"
	"github.com/spark-exporter/spark_exporter/internal/thermallog"
)

// Heat soaks as the guide describes them: a run that starts fast and slows
// as the temperature climbs while power sits flat below the rating. Each
// case is a GB10 stand-in scenario (a point every 30 s, the library
// interpolating between them), logged as nvidia-smi logs it every 1, 5
// and 10 s, and reported on. docs/thermal.md tables what the report says:
//
//	go test ./internal/report -run TestHeatSoakTable -update

const (
	servingFor = 65 * time.Minute
	soakFor    = 40 * time.Minute
	soakClock  = 2420.0 // MHz, where every soak's clock starts
)

// servingClock is a cool GB10's SM clock (MHz) at a power (W): it follows
// power, 2.50 GHz at 37 W, 2.45 GHz at 88 W, 2.32 GHz at 95 W
// (djangodevreng/dgx-spark-benchmarks: 2.47–2.49 GHz at ~50 W, 2.41–2.44
// at 86–90 W, 2.26–2.33 at 95 W; Blackwellboy/model-serving-minefield:
// 2424–2483 MHz at 87–89 W). So a soak that starts at 2.42 GHz has lost
// 1 % already.
func servingClock(power float64) float64 {
	return 2500 - (min(max(power, 37), 90) - 37) - 25*max(0, power-90)
}

// soakCase is 40 minutes of load, m minutes into it, after 65 minutes of
// serving when swings.
type soakCase struct {
	name               string
	swings             bool
	power, temp, clock func(m float64) float64
	falls              bool // throttled from when the clock is 10 % down
}

func constantly(v float64) func(float64) float64 { return func(float64) float64 { return v } }

var soakFalls = []soakCase{
	{name: "linear, 10 MHz a minute", clock: func(m float64) float64 { return max(2050, soakClock-10*m) }},
	{name: "exponential, 12-minute time constant", clock: func(m float64) float64 {
		return soakClock - 370*(1-math.Exp(-m/12))/(1-math.Exp(-soakFor.Minutes()/12))
	}},
	{name: "stepped, 92.5 MHz every 8 minutes", clock: func(m float64) float64 { return soakClock - 92.5*math.Floor(m/8) }},
}

var soakKeeps = []soakCase{
	{name: "warm-up 45 → 84 °C at a flat 90 W, clock steady", power: constantly(90), clock: constantly(servingClock(90)),
		temp: func(m float64) float64 { return 45 + 39*(1-math.Exp(-m/8)) }},
	{name: "hot and steady: 88 °C at 90 W, clock steady", power: constantly(90), temp: constantly(88), clock: constantly(servingClock(90))},
	{name: "clock following power: 65 → 95 W at 82 °C", temp: constantly(82),
		power: func(m float64) float64 { return 65 + 30*min(1, m/5) },
		clock: func(m float64) float64 { return servingClock(65 + 30*min(1, m/5)) }},
}

// soakCases are the falls, each with and without serving before, and the
// runs that must never throttle.
func soakCases() []soakCase {
	var cases []soakCase
	for _, c := range soakFalls {
		c.falls, c.temp = true, func(m float64) float64 { return 84 + 7*m/soakFor.Minutes() }
		c.power = func(m float64) float64 { return 86 + 3*m/soakFor.Minutes() }
		cases = append(cases, c, c)
		cases[len(cases)-1].swings = true
	}
	for i, c := range soakKeeps {
		cases = append(cases, c)
		if i > 0 {
			c.swings = true
			cases = append(cases, c)
		}
	}
	return cases
}

// lcg is a deterministic noise source in [0, 1).
type lcg uint32

func (l *lcg) next() float64 {
	*l = *l*1664525 + 1013904223
	return float64(*l>>8) / (1 << 24)
}

// scenario is the case as a stand-in timeline. Serving: load steps of 1–4
// minutes between 37 and 90 W, an idle minute every 11, 64–83 °C, the
// clock following power; then the case, with ±0.5 W, ±0.3 °C and ±10 MHz
// of noise. A soak's power creeps 86 → 89 W.
func (c soakCase) scenario() string {
	noise := lcg(46)
	var b strings.Builder
	b.WriteString("name NVIDIA GB10\nunsupported clocks_event_counters\n\n")
	point := func(at time.Duration, temp, power, clock, util float64) {
		fmt.Fprintf(&b, "at %-5.0f temp=%.1f power=%.2f sm=%.0f util=%.0f", at.Seconds(), temp, power, clock, util)
		if at == 0 {
			b.WriteString(" pstate=0 reasons=none")
		}
		b.WriteString("\n")
	}
	var from time.Duration
	if c.swings {
		temp, load, next := 64.0, 60.0, time.Duration(0)
		for at := time.Duration(0); at < servingFor; at += 30 * time.Second {
			if at >= next {
				load = 37 + 53*noise.next()
				next = at + time.Minute + time.Duration(noise.next()*6)*30*time.Second
			}
			power, util := load+2*(noise.next()-0.5), 96.0
			if at >= 11*time.Minute && at%(11*time.Minute) < time.Minute {
				power, util = 15+noise.next(), 0
			}
			temp += (50 + 0.37*power - temp) / 4
			point(at, min(max(temp, 64), 83), power, min(servingClock(power)+20*(noise.next()-0.5), 2500), util)
		}
		from = servingFor
	}
	for at := time.Duration(0); at <= soakFor; at += 30 * time.Second {
		m := at.Minutes()
		point(from+at, c.temp(m)+0.6*(noise.next()-0.5), c.power(m)+noise.next()-0.5, c.clock(m)+20*(noise.next()-0.5), 96)
	}
	return b.String()
}

// soakStart is the first row's time.
var soakStart = time.Date(2026, 8, 30, 5, 8, 39, 0, time.UTC)

// since is how far into the soak t is.
func (c soakCase) since(t time.Time) time.Duration {
	if c.swings {
		return t.Sub(soakStart.Add(servingFor))
	}
	return t.Sub(soakStart)
}

// moment is when the case's clock (without noise) is first 10 % below
// where it ran at the same power: at the soak's start, or serving.
func (c soakCase) moment() time.Duration {
	for at := time.Duration(0); at <= soakFor; at += time.Second {
		ref := soakClock
		if m := at.Minutes(); c.swings {
			ref = max(ref, servingClock(c.power(m)))
		}
		if c.clock(at.Minutes()) < (1-judge.ClockFallRatio)*ref {
			return at
		}
	}
	return -1
}

// reportOn is the report of the case's scenario logged every interval.
func reportOn(t *testing.T, text []byte, interval, span time.Duration) Report {
	t.Helper()
	log, err := standin.QueryGPULog(text, soakStart, interval, span)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := thermallog.Parse(bytes.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	r, err := FromLog(tr, judge.DefaultThermalConfig(), LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// checkSoak holds a report to the case: a fall is one episode, open to
// the end, from within two minutes of the moment its clock is 10 % down,
// with the clock as evidence; anything else is never throttled.
func checkSoak(t *testing.T, c soakCase, r Report) {
	t.Helper()
	if !c.falls {
		if len(r.Throttle.Episodes) > 0 {
			t.Errorf("throttled from %v into the load: %s", c.since(r.Throttle.Episodes[0].Start), r.Verdict)
		}
		return
	}
	if len(r.Throttle.Episodes) != 1 {
		t.Fatalf("%d episodes, want one: %s", len(r.Throttle.Episodes), r.Verdict)
	}
	e := r.Throttle.Episodes[0]
	if from, moment := c.since(e.Start), c.moment(); from < moment-2*time.Minute || from > moment+2*time.Minute || !e.Open {
		t.Errorf("throttled from %v into the soak (open to the end: %v); its clock is 10 %% down from %v: %s", from, e.Open, moment, r.Verdict)
	}
	if !strings.Contains(e.Evidence, "clock_fall") {
		t.Errorf("evidence %q, want the clock's fall", e.Evidence)
	}
}

func TestHeatSoakTable(t *testing.T) {
	intervals := []time.Duration{time.Second, 5 * time.Second, 10 * time.Second}
	var table strings.Builder
	table.WriteString("| the load's last 40 minutes | before | 10 % down at | 1 s | 5 s | 10 s | the report's verdict (10 s) |\n|---|---|---|---|---|---|---|\n")
	for _, c := range soakCases() {
		before, moment := "—", "never"
		if c.swings {
			before = "serving"
		}
		if c.falls {
			moment = c.moment().String()
		}
		fmt.Fprintf(&table, "| %s | %s | %s |", c.name, before, moment)
		var verdict string
		for _, interval := range intervals {
			span := soakFor
			if c.swings {
				span += servingFor
			}
			r := reportOn(t, []byte(c.scenario()), interval, span)
			t.Run(fmt.Sprintf("%s/serving=%v/%v", c.name, c.swings, interval), func(t *testing.T) { checkSoak(t, c, r) })
			cell := "not throttled"
			if len(r.Throttle.Episodes) > 0 {
				e := r.Throttle.Episodes[0]
				cell = fmt.Sprintf("from %v, %v, `%s`", c.since(e.Start), time.Duration(r.Throttle.ThrottledSeconds)*time.Second, e.Evidence)
			}
			fmt.Fprintf(&table, " %s |", cell)
			verdict = r.Verdict
		}
		fmt.Fprintf(&table, " %s |\n", verdict)
	}
	checkDocsSection(t, filepath.Join("..", "..", "docs", "thermal.md"), "heat-soak-table", table.String())
}

// checkDocsSection compares the text between a doc's <!-- name --> and
// <!-- /name --> lines with want, or writes want there under -update.
func checkDocsSection(t *testing.T, path, name, want string) {
	t.Helper()
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	open, end := "<!-- "+name+" -->\n", "<!-- /"+name+" -->"
	before, rest, ok := strings.Cut(string(doc), open)
	got, after, ok2 := strings.Cut(rest, end)
	if !ok || !ok2 {
		t.Fatalf("%s has no %s…%s section", path, strings.TrimSpace(open), end)
	}
	if *update {
		if err := os.WriteFile(path, []byte(before+open+want+end+after), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if got != want {
		t.Errorf("%s's %s differs from what the report says (go test ./internal/report -run TestHeatSoakTable -update rewrites it):\n%s", path, name, want)
	}
}

// heatSoakHeader opens the shipped scenario of the guide's soak.
const heatSoakHeader = `# A DGX Spark serving, then soaking in its own heat: 65 minutes of serving
# (load steps of 1-4 minutes between 37 and 90 W, an idle minute every 11,
# 64-79 °C, the SM clock following power: 2.50 GHz at 37 W, 2.45 GHz at
# 88 W), then 40 minutes busy at a flat 86 -> 89 W in which the temperature
# climbs 84 -> 91 °C and the clock falls 10 MHz a minute, 2.42 -> 2.05 GHz.
# The serving is shaped on a real unit's rate sweep
# (djangodevreng/dgx-spark-benchmarks, testdata/reallogs); 88 °C is where
# one writer reports throttling (0xBakeer/inference-atlas PR #225).
# Sources in docs/design.md ("The machine", "How GB10 looks to NVML").
#
# What the exporter must make of it: throttled, evidence clock_fall, from
# within two minutes of the moment the clock is 10 %% below where it ran at
# the same power (%v into the soak) to the end. Written by
# internal/report TestHeatSoakScenario (-update rewrites it).
`

var heatSoakScenario = filepath.Join("..", "..", "testdata", "nvml", "scenarios", "gb10-heat-soak-after-serving.scenario")

// theGuidesSoak is the linear fall after serving: the guide's symptom.
func theGuidesSoak() soakCase {
	for _, c := range soakCases() {
		if c.swings && strings.HasPrefix(c.name, "linear") {
			return c
		}
	}
	panic("no linear soak after serving")
}

// The shipped scenario is the table's linear fall after serving.
func TestHeatSoakScenario(t *testing.T) {
	c := theGuidesSoak()
	want := fmt.Sprintf(heatSoakHeader, c.moment()) + c.scenario()
	if *update {
		if err := os.WriteFile(heatSoakScenario, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(heatSoakScenario)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("%s differs from the soak it plays (go test ./internal/report -run TestHeatSoakScenario -update rewrites it)", heatSoakScenario)
	}
}

// The guide's soak as nvidia-smi logs it every 10 s, without a name
// column: throttled from within two minutes of its clock being 10 % down,
// at least 15 of its last 40 minutes, the verdict naming the clock and the
// power; the soak alone says the same.
func TestHeatSoakAfterServing(t *testing.T) {
	text, err := os.ReadFile(heatSoakScenario)
	if err != nil {
		t.Fatal(err)
	}
	c := theGuidesSoak()
	r := reportOn(t, text, 10*time.Second, servingFor+soakFor)
	checkSoak(t, c, r)
	if r.Throttle.ThrottledSeconds < 15*60 || !r.GPUAssumed {
		t.Errorf("throttled %.0f s of the 40-minute soak, GB10 assumed %v: %s", r.Throttle.ThrottledSeconds, r.GPUAssumed, r.Verdict)
	}
	if !regexp.MustCompile(`throttled from \d\d:\d\d, SM clock [0-9.]+ → [0-9.]+ GHz at a flat 8[6-9] W: thermal`).MatchString(r.Verdict) {
		t.Errorf("the verdict does not name the clock and the power: %s", r.Verdict)
	}
	c.swings = false
	checkSoak(t, c, reportOn(t, []byte(c.scenario()), 10*time.Second, soakFor))
}
