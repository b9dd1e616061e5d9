package report

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/judge"
	"github.com/spark-exporter/spark_exporter/internal/thermallog"
)

type LogOptions struct {
	GPU        *int
	GPUName    string
	PowerLimit float64
	// MachineGPU confirms a GB10 the report would otherwise assume.
	MachineGPU func() string
}

type columnError struct {
	Column string
	Format string
	Has    []string
}

func (e *columnError) Error() string {
	has := "none the report reads"
	if len(e.Has) > 0 {
		has = strings.Join(e.Has, ", ")
	}
	return fmt.Sprintf("the log (%s) has no %s column (it has %s): the report needs temperature.gpu and power.draw", e.Format, e.Column, has)
}

var ErrNoSample = errors.New("no row of the log has both temperature.gpu and power.draw")

func FromLog(tr thermallog.Trace, cfg judge.ThermalConfig, opt LogOptions) (Report, error) {
	return FromRows(tr, func(yield func(thermallog.Row)) error {
		for _, r := range tr.Rows {
			yield(r)
		}
		return nil
	}, cfg, opt)
}

type RowSource func(yield func(thermallog.Row)) error

const maxCadenceGaps = 1 << 12

type gpuRows struct {
	name     string
	nameLine int
	limit    float64
	seen     observed
	samples  int
	last     time.Time
	gaps     []time.Duration
}

// FromRows reads the rows in three passes, so that memory is one window whatever
// the log's length; the log's cadence and the GPU's rating replace cfg's.
func FromRows(meta thermallog.Trace, rows RowSource, cfg judge.ThermalConfig, opt LogOptions) (Report, error) {
	for _, col := range []string{"temperature.gpu", "power.draw"} {
		if !meta.Has(col) {
			return Report{}, &columnError{col, meta.Format, meta.Columns}
		}
	}
	byGPU, err := surveyGPUs(rows)
	if err != nil {
		return Report{}, err
	}
	chosen, err := chooseGPU(byGPU, opt)
	if err != nil {
		return Report{}, err
	}
	gpu := chosen.model(opt, cfg)
	cfg.NominalPower = gpu.rating
	if interval, ok := medianGap(chosen.gaps); ok {
		cfg.Interval = interval
	}
	if err := cfg.Validate(); err != nil {
		return Report{}, fmt.Errorf("the log's samples come every %v: %w (--thermal.window)", cfg.Interval, err)
	}
	p := newLogPass(rows, chosen, cfg, meta.Repeated)
	r, err := p.replay(gpu.gb10)
	if err != nil {
		return Report{}, err
	}
	r.Source, r.Format, r.Throttle.From = "csv", meta.Format, "replay"
	r.GPU = max(chosen.index, 0)
	if len(chosen.gpus) > 1 {
		r.GPUs = chosen.gpus
	}
	gpu.fill(&r)
	for _, e := range meta.Skipped {
		r.SkippedLines = append(r.SkippedLines, SkippedLine{Line: e.Line, Error: e.Err.Error()})
	}
	r.SkippedTotal = meta.SkippedTotal
	r.Verdict, r.VerdictState = verdict(r)
	return r, nil
}

// surveyGPUs is keyed by index (-1: rows that name no GPU).
func surveyGPUs(rows RowSource) (map[int]*gpuRows, error) {
	byGPU := map[int]*gpuRows{}
	err := rows(func(r thermallog.Row) {
		key := -1
		if r.GPU != nil {
			key = *r.GPU
		}
		g := byGPU[key]
		if g == nil {
			if len(byGPU) > thermallog.MaxGPUs {
				return // the parser holds a log to MaxGPUs
			}
			g = &gpuRows{}
			byGPU[key] = g
		}
		g.add(r)
	})
	return byGPU, err
}

func (g *gpuRows) add(r thermallog.Row) {
	if g.name == "" && r.Name != "" {
		g.name, g.nameLine = r.Name, r.Line
	}
	if r.PowerLimit != nil {
		g.limit = max(g.limit, *r.PowerLimit)
	}
	s := sampleOf(r)
	if s == nil {
		return
	}
	g.seen.add(s.Power, s.SMClock)
	if g.samples > 0 && !s.Time.After(g.last) {
		return
	}
	if g.samples > 0 && len(g.gaps) < maxCadenceGaps {
		g.gaps = append(g.gaps, s.Time.Sub(g.last))
	}
	g.samples++
	g.last = s.Time
}

// chosenGPU is merged with the rows that name no GPU.
type chosenGPU struct {
	gpuRows
	index int   // -1: the log names no GPU
	gpus  []int // every GPU the log names
}

func chooseGPU(byGPU map[int]*gpuRows, opt LogOptions) (chosenGPU, error) {
	c := chosenGPU{index: -1}
	for i := range byGPU {
		if i >= 0 {
			c.gpus = append(c.gpus, i)
		}
	}
	sort.Ints(c.gpus)
	switch {
	case opt.GPU != nil:
		c.index = *opt.GPU
		if len(c.gpus) > 0 && byGPU[c.index] == nil {
			return c, fmt.Errorf("the log has no GPU %d (it has %s): --gpu", *opt.GPU, joinInts(c.gpus))
		}
	case len(c.gpus) > 0:
		c.index = c.gpus[0]
	}
	for _, key := range []int{c.index, -1} {
		g := byGPU[key]
		if g == nil || key == -1 && c.index == -1 && c.samples > 0 {
			continue
		}
		if g.name != "" && (c.name == "" || g.nameLine < c.nameLine) {
			c.name, c.nameLine = g.name, g.nameLine
		}
		c.limit = max(c.limit, g.limit)
		c.seen.add(g.seen.maxPower, nil)
		c.seen.maxClock = max(c.seen.maxClock, g.seen.maxClock)
		c.samples += g.samples
		if len(c.gaps) == 0 {
			c.gaps = g.gaps
		}
		if key == -1 {
			break
		}
	}
	if c.samples == 0 {
		return c, ErrNoSample
	}
	return c, nil
}

func (c chosenGPU) model(opt LogOptions, cfg judge.ThermalConfig) gpuModel {
	name := c.name
	if name == "" {
		name = opt.GPUName
	}
	gpu := identifyGPU(name, c.limit, opt.PowerLimit, c.seen, cfg)
	if gpu.assumed && opt.MachineGPU != nil {
		if m := opt.MachineGPU(); strings.Contains(strings.ToUpper(m), "GB10") {
			gpu.name, gpu.assumed, gpu.machine = m, false, true
		}
	}
	return gpu
}

type logPass struct {
	rows     RowSource
	index    int
	cfg      judge.ThermalConfig
	stepCfg  judge.ThermalConfig
	averaged bool
	back     Backward
	sum      *summary
	episodes *episodeLog
	replayer *judge.ThermalReplayer
	avg      averager
	pic      *picture
	last     time.Time
}

func newLogPass(rows RowSource, c chosenGPU, cfg judge.ThermalConfig, repeated int) *logPass {
	p := &logPass{rows: rows, index: c.index, cfg: cfg, stepCfg: cfg}
	if step := cfg.Window / maxWindowSamples; cfg.Interval < step {
		p.stepCfg.Interval, p.averaged = step, true
	}
	p.back.RepeatedHour = repeated
	p.sum = newSummary(cfg)
	p.episodes = newEpisodeLog()
	p.replayer = newReplayer(p.stepCfg, p.episodes.add)
	p.avg = averager{step: p.stepCfg.Interval}
	p.pic = newPicture(c.samples, cfg.MaxGap())
	return p
}

func (p *logPass) replay(gb10 bool) (Report, error) {
	if err := p.samples(nil); err != nil {
		return Report{}, err
	}
	if m, ok := p.avg.flush(); ok {
		p.replayer.Add(&m)
	}
	res := result(p.replayer, p.episodes.add)
	r := p.sum.report(p.episodes, res.Throttled, nil, gb10)
	r.windowCovered = res.Judged > 0
	r.samples, r.pictureGap = p.pic.samples, p.pic.gap()
	if len(r.Throttle.Episodes) > 0 {
		var err error
		describeAll(r.Throttle.Episodes, func(yield func(judge.ThermalSample)) {
			err = p.samples(yield)
		}, p.cfg)
		if err != nil {
			return Report{}, err
		}
	}
	r.StepSeconds = round(p.stepCfg.Interval.Seconds())
	r.Backward = p.back
	return r, nil
}

// samples counts those that go back in time.
func (p *logPass) samples(each func(judge.ThermalSample)) error {
	n := 0
	return p.rows(func(row thermallog.Row) {
		if row.GPU != nil && *row.GPU != p.index {
			return
		}
		s := sampleOf(row)
		if s == nil {
			return
		}
		if n > 0 && !s.Time.After(p.last) {
			if each == nil {
				if p.back.Samples == 0 {
					p.back.FirstLine = row.Line
				}
				p.back.Samples++
			}
			return
		}
		n++
		p.last = s.Time
		if each != nil {
			each(*s)
			return
		}
		p.sum.add(*s)
		p.pic.add(*s)
		if !p.averaged {
			p.replayer.Add(s)
		} else if m, ok := p.avg.add(*s); ok {
			p.replayer.Add(&m)
		}
	})
}

// sampleOf applies the Sampler's rule to a logged row.
func sampleOf(r thermallog.Row) *judge.ThermalSample {
	if r.Temperature == nil || r.Power == nil {
		return nil
	}
	return &judge.ThermalSample{Time: r.Time, Temperature: *r.Temperature, Power: *r.Power,
		SMClock: r.SMClock, Utilization: r.Utilization, Reasons: r.Reasons,
		ThermalSlowdownSeconds: judge.ThermalSlowdownSeconds(r.EventSeconds), PowerCapSeconds: judge.PowerCapSeconds(r.EventSeconds)}
}

// medianGap: missed samples do not move it.
func medianGap(gaps []time.Duration) (time.Duration, bool) {
	if len(gaps) == 0 {
		return 0, false
	}
	sorted := append([]time.Duration(nil), gaps...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	return max(sorted[len(sorted)/2].Round(time.Millisecond), time.Millisecond), true
}

type gpuModel struct {
	name    string
	gb10    bool
	assumed bool    // a GB10 for want of a name: nothing said otherwise
	machine bool    // named by this machine's NVML, the log naming none
	rating  float64 // W; a GPU of unknown rating gets one no power is below
	known   bool    // the rating is known
	why     []string
}

// gb10MaxSMClockHz is the GB10's highest SM clock (nvidia-smi -q's max
// clocks, Blackwellboy/model-serving-minefield).
const gb10MaxSMClockHz = 3003e6

type observed struct{ maxPower, maxClock float64 }

func (o *observed) add(power float64, clock *float64) {
	o.maxPower = max(o.maxPower, power)
	if clock != nil {
		o.maxClock = max(o.maxClock, *clock)
	}
}

// unknownRating: with no rating to compare against, the signature is not judged.
const unknownRating = 1e-9

// identifyGPU takes a GPU nothing names for a GB10 unless a power limit is
// reported (a GB10 reports none) or the samples exceed its rating or clock.
func identifyGPU(name string, limit, given float64, seen observed, cfg judge.ThermalConfig) gpuModel {
	g := gpuModel{name: name}
	g.gb10 = strings.Contains(strings.ToUpper(g.name), "GB10")
	var contradiction string
	if name == "" && given == 0 && limit == 0 {
		switch {
		case seen.maxPower > cfg.NominalPower:
			contradiction = fmt.Sprintf("it draws up to %.0f W, above GB10's %.0f W rating", seen.maxPower, cfg.NominalPower)
		case seen.maxClock > gb10MaxSMClockHz:
			contradiction = fmt.Sprintf("its SM clock reaches %.0f MHz, above GB10's %.0f MHz", seen.maxClock/1e6, gb10MaxSMClockHz/1e6)
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
	r.GPUFromMachine = g.machine
	if g.known {
		r.PowerRatingWatts = ptr(round(g.rating))
	}
	r.Assumptions = append(r.Assumptions, g.why...)
}
