package status

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/collected"
	"github.com/spark-exporter/spark_exporter/internal/judge"
	"github.com/spark-exporter/spark_exporter/internal/workload"
)

// maxPoints: a window of 10 minutes at 5 s holds 120.
const maxPoints = 240

// buildModel makes the model as of st.At.
func buildModel(build BuildInfo, st collected.State) Model {
	now := st.At
	model := Model{
		APIVersion:  APIVersion,
		GeneratedAt: now.UTC().Format(time.RFC3339),
		Exporter:    build,
		Collectors:  collectors(st.Runs),
	}
	if st.Pool != nil {
		model.Pool = poolOf(st.Pool)
	}
	if st.Workloads != nil {
		model.Workloads = workloads(st.Workloads)
		placeWorkloads(model.Workloads, st.Containers, st.Engines)
	}
	training := model.Workloads != nil && model.Workloads.Training > 0
	if st.Plans != nil {
		model.Plans = plans(st.Plans, model.Pool, training)
	}
	if model.Pool != nil {
		model.Pool.judge(model.Plans, training)
	}
	if st.Fabric != nil {
		model.Fabric = fabricOf(st.Fabric)
	}
	if f := st.Flight; f != nil && f.Unclean {
		ended := f.EndedAt.UTC().Format(time.RFC3339)
		model.Flight = &Flight{Unclean: true, EndedAt: ended, Verdict: f.Verdict, State: "unclean",
			Text: "The previous boot ended without a clean shutdown at " + ended + ": " + f.Verdict + ". Details: spark_exporter report --flight."}
	}
	model.NVML = nvmlState(st.GPU)
	model.GPUs = gpus(st.GPU, st.Thermal, now)
	return model
}

// saturated is a byte count as an int64, held at the type's bounds rather
// than wrapped: int64(6.3e20) is MinInt64, which would read as "fits".
func saturated(v float64) int64 {
	switch {
	case math.IsNaN(v):
		return 0
	case v >= math.MaxInt64:
		return math.MaxInt64
	case v <= math.MinInt64:
		return math.MinInt64
	}
	return int64(v)
}

func size(b uint64) int64 { return int64(min(b, math.MaxInt64)) }

func finite(v *float64) *float64 {
	if v == nil || math.IsNaN(*v) || math.IsInf(*v, 0) {
		return nil
	}
	return v
}

func collectors(runs []collected.Run) []Collector {
	out := make([]Collector, 0, len(runs))
	for _, r := range runs {
		out = append(out, Collector{Name: r.Name, Success: r.Success, DurationSeconds: r.Duration.Seconds()})
	}
	slices.SortFunc(out, func(a, b Collector) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

func poolOf(in *collected.Pool) *Pool {
	s := in.Snapshot
	p := &Pool{
		TotalBytes:              size(s.Total),
		FreeBytes:               size(s.Free),
		AvailableBytes:          size(s.Available),
		UsableBytes:             size(s.Usable()),
		UsableTier:              string(judge.TierOf(float64(s.Usable()))),
		PageCacheBytes:          size(s.PageCache),
		FlushableBytes:          size(s.Flushable),
		ReserveBytes:            size(in.Reserve),
		HeadroomBytes:           s.Headroom(in.Reserve),
		HeadroomAfterFlushBytes: s.HeadroomAfterFlush(in.Reserve),
	}
	var cmaFree int64
	if s.CMA != nil {
		cmaFree = min(size(s.CMA.Free), p.FreeBytes)
		p.CMAFreeBytes = &cmaFree
	}
	if in.LargeFreeBytes != nil {
		large := saturated(*in.LargeFreeBytes)
		p.LargeFreeBytes = &large
	}
	p.CompactionFailuresPerSecond = finite(in.CompactionFailuresPerSecond)
	p.Notes = []string{}
	if s.CMA != nil && s.CMA.AccountingInvalid() {
		p.Notes = append(p.Notes, fmt.Sprintf("The kernel's CMA accounting is wrong: CmaFree %s is above CmaTotal %s, as kernel 7.0.0-1019 prints it. "+
			"Memory sits reserved that no figure shows; NVIDIA advised holding off that kernel.", gib(size(s.CMA.Free)), gib(size(s.CMA.Total))))
	}
	p.UsedBytes = max(0, p.TotalBytes-p.FreeBytes-p.PageCacheBytes)
	flushable := min(p.FlushableBytes, p.PageCacheBytes)
	inReserve := min(p.FreeBytes-cmaFree, p.ReserveBytes)
	p.Bar = []Segment{
		{"used", "used", p.UsedBytes},
		{"cache", "page cache kept", p.PageCacheBytes - flushable},
		{"flushable", "flushable cache", flushable},
		{"headroom", "headroom", p.FreeBytes - cmaFree - inReserve},
		{"reserve", "reserve", inReserve},
		{"cma", "free CMA", cmaFree},
	}
	return p
}

// judge: usable memory below a tier comes first, as it is the danger; then
// the planning notes.
func (p *Pool) judge(plans *Plans, training bool) {
	planNeedsFlush := false
	if plans != nil {
		for _, pl := range plans.List {
			planNeedsFlush = planNeedsFlush || pl.State != string(judge.Fits)
		}
	}
	usable := fmt.Sprintf("Usable memory %s (MemAvailable less free CMA)", gib(p.UsableBytes))
	forNewJob := fmt.Sprintf("headroom for a new job %s now, %s after a flush", gib(p.HeadroomBytes), gib(p.HeadroomAfterFlushBytes))
	below := p.HeadroomBytes < 0
	fragmented := p.fragmentation()
	switch {
	case p.UsableTier == string(judge.UsableCritical):
		p.State = "usable_critical"
		p.Text = fmt.Sprintf("%s, below %s: a global OOM kill or a wedge is minutes away. Stop or restart what grows now; %s.%s",
			usable, gib(judge.UsableCriticalBytes), forNewJob, also(fragmented))
	case p.UsableTier == string(judge.UsableLow):
		p.State = "usable_low"
		p.Text = fmt.Sprintf("%s, below %s: the engine's peak is nearing the pool. Cap or restart what grows; %s.%s",
			usable, gib(judge.UsableLowBytes), forNewJob, also(fragmented))
	case fragmented != "":
		p.State = "fragmented"
		p.Text = fmt.Sprintf("%s. The GPU driver's next large allocation can fail (NV_ERR_NO_MEMORY) and the host wedge, whatever usable memory (%s) says. "+
			"Start no model load; stop the engines, flush the page cache and compact, and reboot if the large blocks do not come back (SparkPoolFragmented); %s.",
			fragmented, gib(p.UsableBytes), forNewJob)
	case judge.CacheHoldsHeadroom(float64(p.FlushableBytes), below, planNeedsFlush, training):
		p.State = "cache_holds_headroom"
		p.Text = fmt.Sprintf("%s: no danger. A new job needs a flush first: the page cache holds %s that a flush would give back; %s.",
			usable, gib(p.FlushableBytes), forNewJob)
		p.OOMLadderStep = "Step 1 of the OOM ladder, before a new job: flush the page cache (sync; echo 3 > /proc/sys/vm/drop_caches, as root)."
	case below:
		p.State = "below_reserve"
		p.Text = fmt.Sprintf("%s: no danger. A new job would not fit: free memory less free CMA is %s below the %s reserve; %s.",
			usable, gib(-p.HeadroomBytes), gib(p.ReserveBytes), forNewJob)
	default:
		p.State = "ok"
		p.Text = fmt.Sprintf("%s: no danger; %s (free less free CMA and the %s reserve).",
			usable, forNewJob, gib(p.ReserveBytes))
	}
}

// fragmentation is in the runbook's words, or "" when judge.Fragmented does not hold or cannot be judged.
func (p *Pool) fragmentation() string {
	if p.LargeFreeBytes == nil || p.CompactionFailuresPerSecond == nil ||
		!judge.Fragmented(float64(*p.LargeFreeBytes), *p.CompactionFailuresPerSecond) {
		return ""
	}
	block := fmt.Sprintf("%d MiB", judge.LargeBlockBytes>>20)
	left := "no free block of " + block
	if *p.LargeFreeBytes > 0 {
		left = fmt.Sprintf("only %s free in blocks of %s or more (%d blocks' worth; a model load wants %d)",
			gib(*p.LargeFreeBytes), block, *p.LargeFreeBytes/judge.LargeBlockBytes, judge.LargeBlocksWanted)
	}
	return fmt.Sprintf("The pool is fragmented: %s, and compaction fails %.1f times a second", left, *p.CompactionFailuresPerSecond)
}

func also(fragmented string) string {
	if fragmented == "" {
		return ""
	}
	return " " + fragmented + "."
}

func workloads(res *workload.Result) *Workloads {
	w := &Workloads{List: []Workload{}, Unreadable: res.Unreadable}
	for _, x := range res.Workloads {
		switch x.Role {
		case workload.Training:
			w.Training++
		case workload.Inference:
			w.Inference++
		}
		resident := size(x.ResidentBytes)
		wl := Workload{PID: x.PID, Kind: x.Kind, Role: string(x.Role), ResidentBytes: &resident}
		if x.Cap.Source != "" {
			wl.Cap = &Cap{Ratio: x.Cap.Ratio, Source: string(x.Cap.Source)}
		}
		wl.Heavy = wl.Role == string(workload.Inference) && judge.Heavy(wl.Cap != nil, capRatio(wl.Cap))
		w.List = append(w.List, wl)
	}
	slices.SortFunc(w.List, func(a, b Workload) int {
		return cmp.Or(cmp.Compare(a.Role, b.Role), cmp.Compare(a.PID, b.PID))
	})
	w.judge()
	return w
}

func capRatio(c *Cap) float64 {
	if c == nil {
		return math.NaN()
	}
	return c.Ratio
}

func (w *Workloads) judge() {
	var heavy []string
	for _, wl := range w.List {
		if wl.Heavy {
			heavy = append(heavy, fmt.Sprintf("%s (pid %d, %s)", wl.Kind, wl.PID, capText(wl.Cap)))
		}
	}
	switch {
	case len(w.List) == 0:
		w.State = "none"
		w.Text = "No inference server or training job on the pool."
	case w.Training > 0 && len(heavy) > 0:
		w.State = "contention"
		w.Text = fmt.Sprintf("Training beside an uncapped inference server: %s. Both draw on the one pool and will evict each other's pages without an OOM in the log. Cap the server at %.1f or less, or stop it before a long run.",
			strings.Join(heavy, ", "), judge.HeavyCapRatio)
	case w.Training > 0 && w.Inference > 0:
		w.State = "ok"
		w.Text = fmt.Sprintf("Training beside inference capped at %.1f or less: one heavy job at a time, fine.", judge.HeavyCapRatio)
	case w.Training > 1:
		w.State = "ok"
		w.Text = fmt.Sprintf("%d training jobs share the pool: check that the sum of their needs fits.", w.Training)
	default:
		w.State = "ok"
		w.Text = "One heavy job at a time: fine."
	}
}

func capText(c *Cap) string {
	switch {
	case c == nil:
		return "no memory cap"
	case c.Source == "default":
		return fmt.Sprintf("default cap %s", percent(c.Ratio))
	}
	return fmt.Sprintf("cap %s", percent(c.Ratio))
}

func plans(in []collected.Plan, p *Pool, training bool) *Plans {
	out := &Plans{TrainingRunning: training, List: []Plan{}}
	for _, x := range in {
		required := x.PeakBytes
		pl := Plan{Name: x.Name, RequiredBytes: saturated(required)}
		if p == nil {
			pl.Text = "The pool is not known."
			out.List = append(out.List, pl)
			continue
		}
		fit := judge.FitOf(required, float64(p.HeadroomBytes), float64(p.HeadroomAfterFlushBytes))
		pl.State = string(fit)
		switch fit {
		case judge.Fits:
			pl.Text = fmt.Sprintf("Fits now: needs %s at its peak, %s of headroom.", gib(pl.RequiredBytes), gib(p.HeadroomBytes))
		case judge.FitsAfterFlush:
			pl.Text = fmt.Sprintf("Fits after a flush: needs %s at its peak, %s of headroom after a flush.", gib(pl.RequiredBytes), gib(p.HeadroomAfterFlushBytes))
		default:
			pl.Text = fmt.Sprintf("Will not fit: needs %s at its peak, %s more than the headroom after a flush.", gib(pl.RequiredBytes), gib(saturated(required-float64(p.HeadroomAfterFlushBytes))))
		}
		if training && pl.State != "fits" && pl.State != "" {
			pl.Text += " A training job runs now; it may be this run."
		}
		out.List = append(out.List, pl)
	}
	slices.SortFunc(out.List, func(a, b Plan) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

func nvmlState(g *collected.GPU) NVML {
	switch {
	case g == nil:
		return NVML{State: "off", Text: "The gpu collector is disabled."}
	case g.Stalled.Seconds() > judge.NVMLStalledSeconds:
		return NVML{State: "hung", Text: fmt.Sprintf("The GPU driver has not answered for %s: it is wedged, and nvidia-smi blocks too. "+
			"A GB10 GPU cannot be reset: let the jobs save what they can, then reboot (SparkGPUDriverHung).", waited(g.Stalled))}
	case !g.Loaded:
		return NVML{State: "down", Text: "NVML is not loaded: no NVIDIA driver or library on this host. The exporter retries in the background."}
	case g.Failing:
		return NVML{State: "failing", Text: "NVML is loaded but its reads fail (a wedged driver, or a GPU lost): see the exporter's log."}
	}
	return NVML{State: "up", Text: "NVML is up."}
}

func gpus(g *collected.GPU, th *collected.Thermal, now time.Time) []GPU {
	byIndex := map[int]*GPU{}
	get := func(idx int) *GPU {
		if byIndex[idx] == nil {
			byIndex[idx] = &GPU{Index: idx, ClockEvents: []string{}}
		}
		return byIndex[idx]
	}
	if g != nil {
		for _, d := range g.Snapshot.Devices {
			m := get(d.Index)
			m.Name = d.Name
			m.TemperatureCelsius = finite(d.TemperatureCelsius)
			m.PowerWatts = finite(d.PowerWatts)
			m.SMClockHertz = finite(d.SMClockHertz)
			m.SMClockMaxHertz = finite(d.SMClockMaxHertz)
			m.UtilizationRatio = finite(d.Utilization)
			m.ClockEvents = append(m.ClockEvents, d.ActiveClockEvents()...)
			slices.Sort(m.ClockEvents)
		}
	}
	if th != nil {
		for _, st := range th.Snapshot.GPUs {
			get(st.Index).Thermal = thermalOf(st, th.Config, now)
		}
	}
	out := make([]GPU, 0, len(byIndex))
	for _, g := range byIndex {
		out = append(out, *g)
	}
	slices.SortFunc(out, func(a, b GPU) int { return cmp.Compare(a.Index, b.Index) })
	return out
}

func thermalOf(st judge.GPUThermalState, cfg judge.ThermalConfig, now time.Time) *Thermal {
	v := st.Verdict
	t := &Thermal{
		State:            string(v.State),
		Signature:        v.Signature,
		Episodes:         st.Episodes,
		ThrottledSeconds: st.Throttled.Seconds(),
		Evidence:         evidence(v, cfg),
		Window:           window(st.Window, cfg, now),
	}
	switch st := v.State; {
	case st == judge.Collecting:
		t.Text = fmt.Sprintf("Collecting: the samples cover %s of the %s window; the verdict waits for a whole one.",
			duration(v.Span), duration(cfg.Window))
	case st == judge.Normal:
		t.Text = "Normal: not throttling."
	case st == judge.Watching && v.ClockHolding:
		t.Text = "Watching: hot, clock holding. Busy at flat power below the rating with the temperature climbing or holding hot, but the SM clock has not fallen: not throttling."
	case st == judge.Watching:
		t.Text = "Watching: the temperature is rising while power is not flat below the rating, as in a warm-up. Not throttling yet."
	case st == judge.Throttled && v.Evidence() == "signature_only":
		t.Text = "Throttle signature: signature only; clocks not logged. Busy at flat power below the rating with the temperature climbing or holding hot; no SM clock to say whether it fell."
	case st == judge.Throttled:
		t.Text = "Throttling: the GPU is slowing itself down because of heat; expect slower steps."
	}
	return t
}

func evidence(v judge.ThermalVerdict, cfg judge.ThermalConfig) []string {
	out := []string{}
	if v.ThermalSlowdown {
		out = append(out, fmt.Sprintf("NVML reports a thermal slowdown, for %s now.", duration(v.SlowdownFor)))
	}
	if v.CounterSlowdown {
		out = append(out, fmt.Sprintf("The driver's thermal slowdown counters are growing, %s of the time lately (from %s), %s of slowdown over the window, whatever its flags say.",
			percent(v.SlowdownShare), percent(judge.ThermalSlowdownShare), duration(time.Duration(v.SlowdownSeconds*float64(time.Second)))))
	}
	if c := v.Clock; c.HasClock && c.HasLevel {
		yes := "has fallen"
		if !v.ClockFell {
			yes = "holds"
		}
		out = append(out, fmt.Sprintf("SM clock %s: %.2f GHz lately, against %.2f GHz earlier in the busy stretch (fallen beyond %s below).",
			yes, c.Recent/1e9, c.Level/1e9, percent(judge.ClockFallRatio)))
	}
	if v.HasPowerCap && v.PowerCapSeconds > 0 {
		out = append(out, fmt.Sprintf("The SW power cap held the clocks for %s over the window: the platform's ~100 W cap, not throttling.",
			duration(time.Duration(v.PowerCapSeconds*float64(time.Second)))))
	}
	st := v.Stats
	if st == nil {
		if len(out) == 0 {
			out = append(out, "No recent sample.")
		}
		return out
	}
	if v.Signature {
		out = append(out, "The window shows the throttle signature: busy, power flat below the rating, temperature climbing or holding hot.")
	}
	yesNo := func(ok bool, yes, no string) string {
		if ok {
			return yes
		}
		return no
	}
	out = append(out,
		yesNo(v.Busy, "GPU busy.", "GPU not busy."),
		fmt.Sprintf("Power %s: %s to %s over the window (flat within %s).",
			yesNo(v.Flat, "flat", "not flat"), watts(st.PowerMax-st.PowerSpread), watts(st.PowerMax), watts(cfg.FlatSpread)),
		fmt.Sprintf("Power %s the rating: at most %s, against %s (%s of %s).",
			yesNo(v.BelowNominal, "below", "near"), watts(st.PowerMax), watts(cfg.BelowNominalRatio*cfg.NominalPower),
			percent(cfg.BelowNominalRatio), watts(cfg.NominalPower)))
	if st.HasSlope {
		out = append(out, fmt.Sprintf("Temperature %s: %+.1f °C a minute (climbing from %+.1f).",
			yesNo(v.Climbing, "climbing", yesNo(v.Rising, "rising, levelling off", "not climbing")), st.Slope*60, cfg.ClimbingSlope*60))
	}
	if v.HasMargin {
		out = append(out, fmt.Sprintf("Temperature %s: mean %s, %s under the driver's slowdown limit (hot within %s of it).",
			yesNo(v.Hot, "holding hot", "not hot"), celsius(st.TemperatureMean), celsius(v.MarginMean), celsius(judge.HotMargin)))
	} else {
		out = append(out, fmt.Sprintf("Temperature %s: mean %s (hot from %s).",
			yesNo(v.Hot, "holding hot", "not hot"), celsius(st.TemperatureMean), celsius(cfg.HotTemperature)))
	}
	return out
}

func window(samples []judge.ThermalSample, cfg judge.ThermalConfig, now time.Time) Window {
	w := Window{Seconds: cfg.Window.Seconds(), IntervalSeconds: cfg.Interval.Seconds(),
		NominalWatts: cfg.NominalPower, PlateauWatts: judge.PlateauWatts, Samples: []Point{}}
	from := now.Add(-cfg.Window)
	var in []judge.ThermalSample
	for _, s := range samples {
		if !s.Time.Before(from) && !s.Time.After(now) {
			in = append(in, s)
		}
	}
	step := max(1, (len(in)+maxPoints-1)/maxPoints)
	for i := len(in) - 1; i >= 0; i -= step { // from the latest, which is always kept
		s := in[i]
		w.Samples = append(w.Samples, Point{SecondsAgo: round(now.Sub(s.Time).Seconds(), 1),
			TemperatureCelsius: s.Temperature, PowerWatts: s.Power, SMClockHertz: s.SMClock})
	}
	slices.Reverse(w.Samples)
	if len(w.Samples) == 0 {
		return w
	}
	w.Temperature = rangeOf(w.Samples, func(p Point) (float64, bool) { return p.TemperatureCelsius, true })
	w.Power = rangeOf(w.Samples, func(p Point) (float64, bool) { return p.PowerWatts, true })
	clock := rangeOf(w.Samples, func(p Point) (float64, bool) {
		if p.SMClockHertz == nil {
			return 0, false
		}
		return *p.SMClockHertz, true
	})
	if !math.IsInf(clock.Min, 1) {
		w.SMClock = &clock
	}
	return w
}

func rangeOf(points []Point, get func(Point) (float64, bool)) Range {
	r := Range{Min: math.Inf(1), Max: math.Inf(-1)}
	for _, p := range points {
		if v, ok := get(p); ok {
			r.Min, r.Max, r.Latest = min(r.Min, v), max(r.Max, v), v
		}
	}
	return r
}

func round(x float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(x*p) / p
}
