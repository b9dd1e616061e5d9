package judge

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/thermallog"
)

var update = flag.Bool("update", false, "rewrite the generated traces in testdata/thermal")

const corpusDir = "../../testdata/thermal"

// The synthetic traces of testdata/thermal are written by this generator:
// a first-order thermal model (the die approaches ambient + R·power with a
// time constant τ), noise on power and temperature, temperatures rounded
// to whole degrees as NVML reports them, and scripted power, utilisation,
// ambient and NVML reasons per trace. The figures are set from docs/design.md: idle
// ≈3–5 W at 36–42 °C, a sustained plateau near 100 W, loaded temperatures
// that reach the 91–98 °C reported for hot units.
//
//	go test ./internal/judge -run TestCorpusFiles -update
//
// rewrites them; without -update the test fails if a file differs from its
// generator, so the two cannot drift apart. Traces not generated here (a
// capture from a real Spark) sit beside them and are replayed just the same.
const (
	thermalR   = 0.38              // °C per W: 100 W lifts the die ≈38 °C over ambient
	thermalTau = 120 * time.Second // die + heat-sink time constant
)

// point is what a trace scripts at one moment.
type point struct {
	power   float64 // W, before noise
	util    float64 // 0–1
	ambient float64 // °C: the die's temperature at zero power
	reasons uint64  // NVML clock event reasons
	missing bool    // NVML gave no reading
}

type traceSpec struct {
	name, what  string
	interval    time.Duration
	duration    time.Duration
	guideFormat bool    // nvidia-smi's three columns only (no utilisation, no reasons)
	powerNoise  float64 // W, standard deviation
	tempNoise   float64 // °C, standard deviation before rounding
	startTemp   float64
	expect      []string // expectation comment lines (see corpus_test.go)
	// at scripts the trace; it is called once per sampling time, in
	// order, starting from t = 0 for each rendering.
	at func(t time.Duration, rnd *rand.Rand) point
}

const (
	idleW     = 4.0
	plateauW  = 100.0
	roomC     = 36.0 // ambient that gives the reported ≈38 °C at idle
	busyUtil  = 0.97
	idleUtil  = 0.0
	gpuIdle   = 0x1
	swPowCap  = 0x4
	swThermal = reasonSWThermalSlowdown
	hwThermal = ReasonHWThermalSlowdown
)

func minutes(m float64) time.Duration { return time.Duration(m * float64(time.Minute)) }

// ramp goes linearly from a at t0 to b at t1, flat outside.
func ramp(t, t0, t1 time.Duration, a, b float64) float64 {
	switch {
	case t <= t0:
		return a
	case t >= t1:
		return b
	}
	return a + (b-a)*float64(t-t0)/float64(t1-t0)
}

func quiet(ambient float64) point {
	return point{power: idleW, util: idleUtil, ambient: ambient, reasons: gpuIdle}
}

func loaded(power, ambient float64) point {
	return point{power: power, util: busyUtil, ambient: ambient}
}

// bursts scripts inference serving: decode bursts at burstW separated by
// quiet stretches, with random lengths.
func bursts(burstW, ambient float64) func(t time.Duration, rnd *rand.Rand) point {
	var until time.Duration
	on := false
	return func(t time.Duration, rnd *rand.Rand) point {
		if t == 0 { // a script starts afresh with each rendering
			until, on = 0, false
		}
		for t >= until {
			on = !on
			if on {
				until += time.Duration(5+rnd.IntN(55)) * time.Second
			} else {
				until += time.Duration(5+rnd.IntN(85)) * time.Second
			}
		}
		if on {
			return point{power: burstW, util: 0.95, ambient: ambient}
		}
		return point{power: 12, util: 0.05, ambient: ambient}
	}
}

// climbAfter is an ambient that starts rising by rate °C/min at t0: heat
// soaking the chassis, a blocked vent, a warming room.
func climbAfter(t, t0 time.Duration, base, rate float64) float64 {
	if t <= t0 {
		return base
	}
	return base + rate*(t-t0).Minutes()
}

// plateauClimb: idle until load, then the ≈100 W plateau whose
// temperature climbs by rate °C/min from climbFrom (cooling degrading).
func plateauClimb(load, climbFrom time.Duration, rate float64) func(time.Duration, *rand.Rand) point {
	return func(t time.Duration, _ *rand.Rand) point {
		if t < load {
			return quiet(roomC)
		}
		return loaded(plateauW, climbAfter(t, climbFrom, roomC, rate))
	}
}

var corpus = []traceSpec{
	{
		name: "idle", what: "idle GPU: flat ≈4 W, ≈38 °C, NVML's gpu_idle reason",
		interval: 5 * time.Second, duration: minutes(30), powerNoise: 0.5, tempNoise: 0.3, startTemp: 38,
		expect: []string{"expect: no-throttle", "episodes: 0", "state 5m: collecting", "state 15m: normal", "state 30m: normal"},
		at:     func(time.Duration, *rand.Rand) point { return quiet(roomC) },
	},
	{
		name: "idle-warming-room", what: "idle GPU in a room warming by 0.15 °C/min: slow drift, not a climb",
		interval: 5 * time.Second, duration: minutes(40), powerNoise: 0.5, tempNoise: 0.3, startTemp: 38,
		expect: []string{"expect: no-throttle", "episodes: 0", "state 20m: normal", "state 40m: normal"},
		at: func(t time.Duration, _ *rand.Rand) point {
			return quiet(roomC + 0.15*t.Minutes())
		},
	},
	{
		name: "warmup-settle", what: "job starts at 5m: power boosts to ≈150 W, settles to the ≈100 W plateau, temperature rises then levels at ≈74 °C",
		interval: 5 * time.Second, duration: minutes(35), powerNoise: 2, tempNoise: 0.3, startTemp: 38,
		expect: []string{"expect: no-throttle", "episodes: 0", "state 8m: collecting", "state 12m: watching", "state 30m: normal"},
		at: func(t time.Duration, _ *rand.Rand) point {
			if t < minutes(5) {
				return quiet(roomC)
			}
			return loaded(plateauW+50*math.Exp(-(t-minutes(5)).Seconds()/90), roomC)
		},
	},
	{
		name: "warmup-near-peak", what: "power held near its ≈140 W peak, swinging as clocks boost, temperature climbing: keep watching",
		interval: 5 * time.Second, duration: minutes(30), powerNoise: 4, tempNoise: 0.3, startTemp: 40,
		expect: []string{"expect: no-throttle", "episodes: 0", "state 15m: watching", "state 25m: watching"},
		at: func(t time.Duration, _ *rand.Rand) point {
			if t < minutes(3) {
				return quiet(roomC)
			}
			p := 140 + 15*math.Sin(2*math.Pi*t.Seconds()/97)
			return loaded(p, climbAfter(t, minutes(3), roomC-20, 1))
		},
	},
	{
		name: "plateau-steady", what: "training at the ≈100 W plateau, temperature steady at ≈74 °C: the platform's cap, not a fault",
		interval: 5 * time.Second, duration: minutes(40), powerNoise: 3, tempNoise: 0.3, startTemp: 38,
		expect: []string{"expect: no-throttle", "episodes: 0", "state 11m: watching", "state 15m: normal", "state 40m: normal"},
		at: func(t time.Duration, _ *rand.Rand) point {
			if t < minutes(2) {
				return quiet(roomC)
			}
			return loaded(plateauW, roomC)
		},
	},
	{
		name: "plateau-warm-below-hot", what: "plateau at ≈100 W holding ≈82 °C in a warm room: warm but steady, below the hot threshold",
		interval: 5 * time.Second, duration: minutes(40), powerNoise: 3, tempNoise: 0.4, startTemp: 45,
		expect: []string{"expect: no-throttle", "episodes: 0", "state 20m: normal", "state 40m: normal"},
		at: func(t time.Duration, _ *rand.Rand) point {
			if t < minutes(1) {
				return quiet(roomC + 8)
			}
			return loaded(plateauW, roomC+8)
		},
	},
	{
		name: "bursty-inference", what: "inference serving: decode bursts at ≈95 W between quiet stretches at ≈12 W; power never flat",
		interval: 5 * time.Second, duration: minutes(40), powerNoise: 2, tempNoise: 0.3, startTemp: 42,
		expect: []string{"expect: no-throttle", "episodes: 0"},
		at:     bursts(95, roomC),
	},
	{
		name: "bursty-inference-hot", what: "the same bursts in a hot enclosure, temperature ≈85–95 °C: hot, but power is not flat (only NVML's reasons would show a slowdown)",
		interval: 5 * time.Second, duration: minutes(40), powerNoise: 2, tempNoise: 0.3, startTemp: 80,
		expect: []string{"expect: no-throttle", "episodes: 0"},
		at:     bursts(95, roomC+32),
	},
	{
		name: "stuck-low-30w", what: "busy GPU stuck at a ≈30 W cap after a failed USB-PD negotiation (sw_power_cap reason): a power fault, not thermal",
		interval: 5 * time.Second, duration: minutes(40), powerNoise: 0.8, tempNoise: 0.3, startTemp: 40,
		expect: []string{"expect: no-throttle", "episodes: 0", "state 30m: normal"},
		at: func(time.Duration, *rand.Rand) point {
			return point{power: 29.5, util: 1, ambient: roomC, reasons: swPowCap}
		},
	},
	{
		name: "idle-with-gaps", what: "idle GPU with NVML silent for 1 min at 12m and 4 min at 25m: the window restarts after each gap",
		interval: 5 * time.Second, duration: minutes(45), powerNoise: 0.5, tempNoise: 0.3, startTemp: 38,
		expect: []string{"expect: no-throttle", "episodes: 0", "state 11m: normal", "state 14m: collecting", "state 28m: collecting", "state 40m: normal"},
		at: func(t time.Duration, _ *rand.Rand) point {
			p := quiet(roomC)
			p.missing = (t >= minutes(12) && t < minutes(13)) || (t >= minutes(25) && t < minutes(29))
			return p
		},
	},
	{
		name: "gap-not-flat", what: "busy, flat power, temperature climbing, but NVML silent from 3m to 9m and the job ends at 13m: samples either side of a gap never make a flat window",
		interval: 5 * time.Second, duration: minutes(30), powerNoise: 2, tempNoise: 0.3, startTemp: 72,
		expect: []string{"expect: no-throttle", "episodes: 0", "state 12m: collecting", "state 13m: collecting"},
		at: func(t time.Duration, _ *rand.Rand) point {
			if t >= minutes(13) {
				return quiet(roomC)
			}
			p := loaded(plateauW, climbAfter(t, 0, roomC, 1))
			p.missing = t >= minutes(3) && t < minutes(9)
			return p
		},
	},
	{
		name: "flat-near-rating", what: "power flat at ≈228 W, within 10% of the 240 W rating, temperature climbing: not below the rating, keep watching",
		interval: 5 * time.Second, duration: minutes(30), powerNoise: 2, tempNoise: 0.3, startTemp: 60,
		expect: []string{"expect: no-throttle", "episodes: 0", "state 20m: watching", "state 30m: watching"},
		at: func(t time.Duration, _ *rand.Rand) point {
			return loaded(228, climbAfter(t, 0, roomC-40, 0.8))
		},
	},
	{
		name: "cooldown", what: "a warm plateau ends at 20m: power falls to idle, temperature decays",
		interval: 5 * time.Second, duration: minutes(40), powerNoise: 3, tempNoise: 0.3, startTemp: 74,
		expect: []string{"expect: no-throttle", "episodes: 0", "state 15m: normal", "state 25m: normal", "state 40m: normal"},
		at: func(t time.Duration, _ *rand.Rand) point {
			if t >= minutes(20) {
				return quiet(roomC)
			}
			return loaded(plateauW, roomC)
		},
	},
	{
		name: "ramping-load", what: "load growing over 25 minutes (30 → 110 W), temperature following: power not flat",
		interval: 5 * time.Second, duration: minutes(40), powerNoise: 2, tempNoise: 0.3, startTemp: 48,
		expect: []string{"expect: no-throttle", "episodes: 0", "state 20m: watching"},
		at: func(t time.Duration, _ *rand.Rand) point {
			return loaded(ramp(t, 0, minutes(25), 30, 110), roomC)
		},
	},
	{
		name: "guide-format-idle-30s", what: "the thermal-sample.sh log (three columns, every 30 s) of an idle GPU; busy is judged from power",
		interval: 30 * time.Second, duration: minutes(40), guideFormat: true, powerNoise: 0.5, tempNoise: 0.3, startTemp: 38,
		expect: []string{"expect: no-throttle", "episodes: 0", "state 20m: normal"},
		at:     func(time.Duration, *rand.Rand) point { return quiet(roomC) },
	},
	{
		name: "plateau-climb", what: "flat ≈100 W plateau; from 15m the temperature keeps climbing ≈1 °C/min (cooling degrading) to the mid 90s",
		interval: 5 * time.Second, duration: minutes(40), powerNoise: 2, tempNoise: 0.3, startTemp: 38,
		expect: []string{"expect: throttled", "onset: 15m", "episodes: 1", "state 14m: normal", "state 30m: throttled", "state 40m: throttled"},
		at:     plateauClimb(minutes(2), minutes(15), 1),
	},
	{
		name: "plateau-hold-hot", what: "flat ≈100 W plateau in a hot enclosure: temperature rises to ≈90 °C and holds there",
		interval: 5 * time.Second, duration: minutes(40), powerNoise: 2, tempNoise: 0.4, startTemp: 45,
		expect: []string{"expect: throttled", "onset: 6m", "episodes: 1", "state 20m: throttled", "state 40m: throttled"},
		at: func(t time.Duration, _ *rand.Rand) point {
			if t < minutes(2) {
				return quiet(roomC + 16)
			}
			return loaded(plateauW, roomC+16)
		},
	},
	{
		name: "plateau-climb-noisy", what: "the plateau climb with noisier sensors (power σ 3 W, temperature σ 1 °C): one episode, no flapping",
		interval: 5 * time.Second, duration: minutes(45), powerNoise: 3, tempNoise: 1, startTemp: 38,
		expect: []string{"expect: throttled", "onset: 15m", "episodes: 1", "state 35m: throttled"},
		at:     plateauClimb(minutes(2), minutes(15), 0.8),
	},
	{
		name: "peak-then-throttle", what: "power at its ≈140 W peak with temperature rising to ≈88 °C (watching); at 12m power drops to a flat 100 W and temperature holds hot: the throttle signature",
		interval: 5 * time.Second, duration: minutes(45), powerNoise: 3, tempNoise: 0.4, startTemp: 40,
		expect: []string{"expect: throttled", "onset: 12m", "episodes: 1", "state 11m: watching", "state 30m: throttled"},
		at: func(t time.Duration, _ *rand.Rand) point {
			if t < minutes(2) {
				return quiet(roomC)
			}
			if t < minutes(12) {
				return loaded(140+6*math.Sin(2*math.Pi*t.Seconds()/83), roomC)
			}
			// Clocks held down: power falls to the plateau while the
			// heat-soaked chassis keeps the die hot.
			return loaded(plateauW, roomC+15)
		},
	},
	{
		name: "nvml-sw-thermal", what: "bursty load in a hot enclosure; NVML reports sw_thermal_slowdown from 14m to 24m: direct evidence, no window needed",
		interval: 5 * time.Second, duration: minutes(35), powerNoise: 2, tempNoise: 0.3, startTemp: 80,
		expect: []string{"expect: throttled", "onset: 14m", "episodes: 1", "state 20m: throttled", "state 30m: normal"},
		at: func() func(time.Duration, *rand.Rand) point {
			b := bursts(95, roomC+30)
			return func(t time.Duration, rnd *rand.Rand) point {
				p := b(t, rnd)
				if t >= minutes(14) && t < minutes(24) {
					p.reasons |= swThermal
				}
				return p
			}
		}(),
	},
	{
		name: "nvml-hw-thermal-early", what: "NVML reports hw_thermal_slowdown at 3m for two minutes, before the window is full",
		interval: 5 * time.Second, duration: minutes(20), powerNoise: 2, tempNoise: 0.3, startTemp: 70,
		expect: []string{"expect: throttled", "onset: 3m", "episodes: 1", "state 4m: throttled", "state 7m: collecting", "state 20m: normal"},
		at: func(t time.Duration, _ *rand.Rand) point {
			p := loaded(plateauW, roomC)
			if t >= minutes(3) && t < minutes(5) {
				p.reasons = hwThermal
			}
			return p
		},
	},
	{
		name: "throttle-recovery", what: "plateau climb from 10m, then the job stops at 30m: the episode ends when power leaves the plateau",
		interval: 5 * time.Second, duration: minutes(50), powerNoise: 2, tempNoise: 0.3, startTemp: 38,
		expect: []string{"expect: throttled", "onset: 10m", "episodes: 1", "state 25m: throttled", "state 31m: normal", "state 50m: normal"},
		at: func(t time.Duration, _ *rand.Rand) point {
			switch {
			case t < minutes(1):
				return quiet(roomC)
			case t < minutes(30):
				return loaded(plateauW, climbAfter(t, minutes(10), roomC, 1))
			}
			return quiet(roomC)
		},
	},
	{
		name: "two-episodes", what: "two runs, each climbing on the plateau, with a 20-minute cool-down between them",
		interval: 5 * time.Second, duration: minutes(75), powerNoise: 2, tempNoise: 0.3, startTemp: 38,
		expect: []string{"expect: throttled", "onset: 10m", "episodes: 2", "state 25m: throttled", "state 40m: normal", "state 70m: throttled"},
		at: func(t time.Duration, _ *rand.Rand) point {
			switch {
			case t < minutes(1):
				return quiet(roomC)
			case t < minutes(28):
				return loaded(plateauW, climbAfter(t, minutes(10), roomC, 1))
			case t < minutes(48):
				return quiet(roomC)
			}
			return loaded(plateauW, climbAfter(t, minutes(55), roomC, 1))
		},
	},
	{
		name: "throttle-gap", what: "throttling plateau climb; NVML silent for 2 minutes at 30m: the state drops to collecting and the signature is found again a window later",
		interval: 5 * time.Second, duration: minutes(50), powerNoise: 2, tempNoise: 0.3, startTemp: 38,
		expect: []string{"expect: throttled", "onset: 10m", "episodes: 2", "state 29m: throttled", "state 31m: collecting", "state 38m: collecting", "state 45m: throttled"},
		at: func(t time.Duration, _ *rand.Rand) point {
			if t < minutes(1) {
				return quiet(roomC)
			}
			p := loaded(plateauW, climbAfter(t, minutes(10), roomC, 0.7))
			p.missing = t >= minutes(30) && t < minutes(32)
			return p
		},
	},
	{
		name: "guide-format-throttle-30s", what: "the thermal-sample.sh log (three columns, every 30 s) of a plateau climb; busy is judged from power",
		interval: 30 * time.Second, duration: minutes(45), guideFormat: true, powerNoise: 2, tempNoise: 0.3, startTemp: 38,
		expect: []string{"expect: throttled", "onset: 15m", "episodes: 1", "state 40m: throttled"},
		at:     plateauClimb(minutes(2), minutes(15), 1),
	},
	{
		name: "throttle-missed-samples", what: "plateau climb with single and double missed samples (within the gap tolerance): detection is not delayed",
		interval: 5 * time.Second, duration: minutes(40), powerNoise: 2, tempNoise: 0.3, startTemp: 38,
		expect: []string{"expect: throttled", "onset: 12m", "episodes: 1", "state 35m: throttled"},
		at: func() func(time.Duration, *rand.Rand) point {
			skipped := 0
			return func(t time.Duration, rnd *rand.Rand) point {
				if t == 0 {
					skipped = 0
				}
				p := loaded(plateauW, climbAfter(t, minutes(12), roomC, 1))
				if t < minutes(1) {
					p = quiet(roomC)
				}
				if skipped < 2 && rnd.IntN(8) == 0 {
					skipped++
					p.missing = true
				} else {
					skipped = 0
				}
				return p
			}
		}(),
	},
}

// corpusStart is the first timestamp of every generated trace.
var corpusStart = time.Date(2025, 11, 24, 14, 0, 0, 0, time.Local)

// render writes a trace: its header comments, the CSV header, the rows.
func (s traceSpec) render() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s: %s\n", s.name, s.what)
	fmt.Fprintf(&b, "# generated by internal/judge/thermal_corpus_gen_test.go; go test ./internal/judge -run TestCorpusFiles -update\n")
	fmt.Fprintf(&b, "# interval: %v\n", s.interval)
	for _, e := range s.expect {
		fmt.Fprintf(&b, "# %s\n", e)
	}
	if s.guideFormat {
		b.WriteString(thermallog.Header + "\n")
	} else {
		b.WriteString(thermallog.Header + ",utilization.gpu,clocks_event_reasons.active\n")
	}
	rnd := rand.New(rand.NewPCG(uint64(len(s.name)), hash(s.name)))
	temp := s.startTemp
	decay := 1 - math.Exp(-s.interval.Seconds()/thermalTau.Seconds())
	for t := time.Duration(0); t <= s.duration; t += s.interval {
		p := s.at(t, rnd)
		power := math.Max(0, p.power+rnd.NormFloat64()*s.powerNoise)
		temp += (p.ambient + thermalR*power - temp) * decay
		if p.missing {
			continue
		}
		reported := math.Round(temp + rnd.NormFloat64()*s.tempNoise)
		row := thermallog.Row{Time: corpusStart.Add(t), Temperature: &reported, Power: &power}
		b.WriteString(thermallog.Format(row))
		if !s.guideFormat {
			fmt.Fprintf(&b, ", %.0f %%, 0x%016x", 100*p.util, p.reasons)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func hash(s string) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range []byte(s) {
		h = (h ^ uint64(c)) * 1099511628211
	}
	return h
}

// TestCorpusFiles keeps testdata/thermal in step with the generator.
func TestCorpusFiles(t *testing.T) {
	if len(corpus) < 20 {
		t.Errorf("the corpus has %d traces; the issue asks for at least 20", len(corpus))
	}
	for _, s := range corpus {
		path := filepath.Join(corpusDir, s.name+".csv")
		got := s.render()
		if *update {
			if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (go test ./internal/judge -run TestCorpusFiles -update writes it)", err)
		}
		if string(want) != got {
			t.Errorf("%s differs from its generator (go test ./internal/judge -run TestCorpusFiles -update rewrites it)", path)
		}
	}
}
