package report

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/judge"
	"github.com/spark-exporter/spark_exporter/internal/thermal"
	"github.com/spark-exporter/spark_exporter/internal/thermallog"
)

// LogOptions say what a log does not: which GPU, and what it is.
type LogOptions struct {
	// GPU selects the GPU of a log with an index column (nil: the
	// lowest index in the log).
	GPU *int
	// GPUName is the GPU's model where the log has no name column
	// (--gpu.name): GB10's rating and plateau apply to a GB10 only.
	GPUName string
	// PowerLimit is the GPU's power rating in W where the log has no
	// power.limit column (--gpu.power-limit); 0 when not known.
	PowerLimit float64
}

// ColumnError is a log that lacks a column the report needs.
type ColumnError struct {
	Column string
	Format string
	Has    []string
}

func (e *ColumnError) Error() string {
	has := "none the report reads"
	if len(e.Has) > 0 {
		has = strings.Join(e.Has, ", ")
	}
	return fmt.Sprintf("the log (%s) has no %s column (it has %s): the report needs temperature.gpu and power.draw", e.Format, e.Column, has)
}

// ErrNoSample is a log whose rows never give temperature and power
// together.
var ErrNoSample = errors.New("no row of the log has both temperature.gpu and power.draw")

// FromLog reports on a parsed thermal log. cfg is the analysis's
// configuration but for its Interval, which is the log's own cadence (the
// median time between its rows), and its NominalPower, which is the
// GPU's (GB10: cfg's; another GPU: its power limit, or unknown).
//
// Time is linear in the log's rows: each step reads at most a window of
// MaxWindowSamples samples, and a silence costs a few steps whatever its
// length. Memory is the rows, the samples (one per row, about 100 bytes)
// and one window.
func FromLog(tr thermallog.Trace, cfg judge.ThermalConfig, opt LogOptions) (Report, error) {
	for _, col := range []string{"temperature.gpu", "power.draw"} {
		if !tr.Has(col) {
			return Report{}, &ColumnError{col, tr.Format, tr.Columns}
		}
	}
	rows, index, gpus := selectGPU(tr.Rows, opt.GPU)
	if opt.GPU != nil && len(gpus) > 0 && len(rows) == 0 {
		return Report{}, fmt.Errorf("the log has no GPU %d (it has %s): --gpu", *opt.GPU, joinInts(gpus))
	}
	gpu := identify(rows, opt, cfg)
	cfg.NominalPower = gpu.rating

	// The samples in time order: a sample not after the one before is
	// left out, counted and named by its line.
	var samples []judge.ThermalSample
	var back Backward
	back.RepeatedHour = tr.Repeated
	for _, row := range rows {
		s := thermal.SampleOf(row)
		if s == nil {
			continue
		}
		if n := len(samples); n > 0 && !s.Time.After(samples[n-1].Time) {
			if back.Samples == 0 {
				back.FirstLine = row.Line
			}
			back.Samples++
			continue
		}
		samples = append(samples, *s)
	}
	if len(samples) == 0 {
		return Report{}, ErrNoSample
	}
	if interval, ok := cadence(samples); ok {
		cfg.Interval = interval
	}
	if err := cfg.Validate(); err != nil {
		return Report{}, fmt.Errorf("the log's samples come every %v: %w (--thermal.window)", cfg.Interval, err)
	}
	judged, stepCfg := samples, cfg
	if step := cfg.Window / MaxWindowSamples; cfg.Interval < step {
		judged, stepCfg.Interval = average(samples, step), step
	}
	episodes, throttled, covered := replay(judged, stepCfg)
	r := build(samples, episodes, throttled, nil, cfg, gpu.gb10)
	r.windowCovered = covered
	r.StepSeconds = round(stepCfg.Interval.Seconds())
	r.Source, r.Format, r.Throttle.From = "csv", tr.Format, "replay"
	r.GPU = index
	if len(gpus) > 1 {
		r.GPUs = gpus
	}
	gpu.fill(&r)
	r.Backward = back
	for _, e := range tr.Skipped {
		r.SkippedLines = append(r.SkippedLines, SkippedLine{Line: e.Line, Error: e.Err.Error()})
	}
	r.SkippedTotal = tr.SkippedTotal
	r.Verdict, r.VerdictState = verdict(r)
	return r, nil
}

// gpuModel is what the report knows of the log's GPU.
type gpuModel struct {
	name    string
	gb10    bool
	assumed bool    // a GB10 for want of a name: nothing said otherwise
	rating  float64 // W; a GPU of unknown rating gets one no power is below
	known   bool    // the rating is known
	why     []string
}

// GB10MaxSMClockHz is the GB10's highest SM clock (nvidia-smi -q's max
// clocks: 3003 MHz, Blackwellboy/model-serving-minefield): a log with a
// faster clock is another GPU's.
const GB10MaxSMClockHz = 3003e6

// observed is what the samples say of the GPU, against a GB10: the most
// power and the fastest SM clock they hold.
type observed struct{ maxPower, maxClock float64 }

func (o *observed) add(power float64, clock *float64) {
	o.maxPower = max(o.maxPower, power)
	if clock != nil {
		o.maxClock = max(o.maxClock, *clock)
	}
}

// unknownRating makes "power flat below the rating" false whatever the
// power: with no rating to compare against, the signature is not judged.
const unknownRating = 1e-9

// identify finds the GPU's model and rating: a GB10 (by the log's name
// column, or --gpu.name) is judged against GB10's rating (cfg); another
// GPU against its power limit where the log or --gpu.power-limit gives
// one, else not at all.
func identify(rows []thermallog.Row, opt LogOptions, cfg judge.ThermalConfig) gpuModel {
	var name string
	var limit float64
	var seen observed
	for _, r := range rows {
		if name == "" && r.Name != "" {
			name = r.Name
		}
		if r.PowerLimit != nil {
			limit = max(limit, *r.PowerLimit)
		}
		if r.Power != nil {
			seen.add(*r.Power, r.SMClock)
		}
	}
	if name == "" {
		name = opt.GPUName
	}
	return identifyGPU(name, limit, opt.PowerLimit, seen, cfg)
}

// identifyGPU is identify's judgement on a name and a power limit (0:
// none), given limit, a rating the user gave (0: none), and what the
// samples showed. A GPU nothing names is a GB10, the machine the tool is
// for, unless a power limit is reported (a GB10 reports none) or the
// samples draw more than its rating or clock faster than it can.
func identifyGPU(name string, limit, given float64, seen observed, cfg judge.ThermalConfig) gpuModel {
	g := gpuModel{name: name}
	g.gb10 = strings.Contains(strings.ToUpper(g.name), "GB10")
	var contradiction string
	if name == "" && given == 0 && limit == 0 {
		switch {
		case seen.maxPower > cfg.NominalPower:
			contradiction = fmt.Sprintf("it draws up to %.0f W, above GB10's %.0f W rating", seen.maxPower, cfg.NominalPower)
		case seen.maxClock > GB10MaxSMClockHz:
			contradiction = fmt.Sprintf("its SM clock reaches %.0f MHz, above GB10's %.0f MHz", seen.maxClock/1e6, GB10MaxSMClockHz/1e6)
		default:
			g.gb10, g.assumed = true, true
		}
	}
	switch {
	case g.gb10:
		g.rating, g.known = cfg.NominalPower, true
	case given > 0:
		g.rating, g.known = given, true
	case limit > 0:
		g.rating, g.known = limit, true
	default:
		g.rating = unknownRating
	}
	if !g.gb10 {
		what := "the GPU is not named (no name column or spark_gpu_info, no --gpu.name)"
		switch {
		case g.name != "":
			what = "the GPU is not a GB10"
		case contradiction != "":
			what = "the GPU is not named and is not a GB10: " + contradiction
		case given > 0 || limit > 0:
			what = "the GPU is not named and has a power limit (a GB10 reports none)"
		}
		g.why = append(g.why, what+": GB10's ~100 W plateau is not assumed")
		if !g.known {
			g.why = append(g.why, "no power rating (no power.limit column or spark_gpu_power_limit_watts, no --gpu.power-limit): the throttle signature, power flat below the rating, is not judged; only the driver's slowdown reasons and counters are")
		}
	}
	return g
}

func (g gpuModel) fill(r *Report) {
	if g.name != "" {
		r.GPUName = ptr(g.name)
	}
	r.GPUAssumed = g.assumed
	if g.known {
		r.PowerRatingWatts = ptr(round(g.rating))
	}
	r.Assumptions = append(r.Assumptions, g.why...)
}

// selectGPU keeps the rows of one GPU of a log with an index column; rows
// without an index (a log without the column) are all kept.
func selectGPU(rows []thermallog.Row, gpu *int) ([]thermallog.Row, int, []int) {
	seen := map[int]bool{}
	var gpus []int
	for _, r := range rows {
		if r.GPU != nil && !seen[*r.GPU] {
			seen[*r.GPU] = true
			gpus = append(gpus, *r.GPU)
		}
	}
	sort.Ints(gpus)
	index := -1
	if gpu != nil {
		index = *gpu
	} else {
		for _, r := range rows {
			if r.GPU != nil && (index < 0 || *r.GPU < index) {
				index = *r.GPU
			}
		}
	}
	var out []thermallog.Row
	for _, r := range rows {
		if r.GPU == nil || *r.GPU == index {
			out = append(out, r)
		}
	}
	return out, max(index, 0), gpus
}

// cadence is the median time between consecutive samples, to the
// millisecond nvidia-smi prints: the log's sampling interval, which missed
// samples do not move.
func cadence(samples []judge.ThermalSample) (time.Duration, bool) {
	var gaps []time.Duration
	for i := 1; i < len(samples); i++ {
		if d := samples[i].Time.Sub(samples[i-1].Time); d > 0 {
			gaps = append(gaps, d)
		}
	}
	if len(gaps) == 0 {
		return 0, false
	}
	sort.Slice(gaps, func(i, j int) bool { return gaps[i] < gaps[j] })
	return max(gaps[len(gaps)/2].Round(time.Millisecond), time.Millisecond), true
}
