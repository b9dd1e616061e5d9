package report

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/spark-exporter/spark_exporter/internal/judge"
	"github.com/spark-exporter/spark_exporter/internal/thermallog"
)

type Query struct {
	Instance string // the instance label; empty: the only Spark there is
	GPU      string // the gpu label
	From, To time.Time
	Step     time.Duration // resolution; 0 picks one (resolution)
}

// resolution is coarse enough for Prometheus's limit of 11,000 points a series.
func resolution(span time.Duration) time.Duration {
	return max(time.Second, (span / 10000).Round(time.Second))
}

var ErrInstance = errors.New("instance")

// FromPrometheus: cfg replays the scraped samples where the thermal collector was off.
func FromPrometheus(ctx context.Context, api v1.API, q Query, cfg judge.ThermalConfig) (Report, error) {
	if q.Step <= 0 {
		q.Step = resolution(q.To.Sub(q.From))
	}
	p := &prom{ctx: ctx, api: api, q: q, span: fmt.Sprintf("[%ds]", int(math.Ceil(q.To.Sub(q.From).Seconds())))}
	if q.Instance == "" {
		inst, err := p.onlyInstance()
		if err != nil {
			return Report{}, err
		}
		p.q.Instance = inst
	}
	sel := fmt.Sprintf(`instance=%s,gpu=%s`, strconv.Quote(p.q.Instance), strconv.Quote(q.GPU))
	inst := fmt.Sprintf(`instance=%s`, strconv.Quote(p.q.Instance))

	samples := p.samples(sel)
	cfg.Interval = q.Step
	gpu := p.gpu(sel, samples, cfg)
	cfg.NominalPower = gpu.rating
	episodes, throttled, from, covered := p.throttle(sel, samples, cfg)
	var energy *float64
	// No more energy than the most power any GPU draws over the range.
	if j, ok := p.growth(`spark_gpu_energy_joules_total{` + sel + `}`); ok && j <= thermallog.MaxPower*p.seconds() {
		energy = &j
	}
	r := build(samples, episodes, throttled, energy, cfg, gpu.gb10)
	r.Source, r.Instance, r.Throttle.From = "prometheus", p.q.Instance, from
	r.windowCovered = covered
	gpu.fill(&r)
	if n, err := strconv.Atoi(q.GPU); err == nil {
		r.GPU = n
	}
	if r.Samples == 0 {
		r.Start, r.End = q.From, q.To
		r.DurationSeconds = round(q.To.Sub(q.From).Seconds())
	}
	r.Memory = p.memory(inst)
	r.Alerts, r.AlertsLeftOut = p.alerts(inst)
	if p.err != nil {
		return Report{}, p.err
	}
	r.PointsLeftOut = &p.leftOut
	r.Verdict, r.VerdictState = verdict(r)
	return r, nil
}

func (p *prom) gpu(sel string, samples []judge.ThermalSample, cfg judge.ThermalConfig) gpuModel {
	var name string
	vec, _ := p.query(`max by (name) (last_over_time(spark_gpu_info{`+sel+`}`+p.span+`))`, p.q.To).(model.Vector)
	if len(vec) > 0 {
		name = string(vec[0].Metric["name"])
	}
	var limit float64
	if w := p.scalar(`max_over_time(spark_gpu_power_limit_watts{` + sel + `}` + p.span + `)`); w != nil && *w > 0 {
		limit = *w
	}
	var seen observed
	for _, s := range samples {
		seen.add(s.Power, s.SMClock)
	}
	return identifyGPU(name, limit, 0, seen, cfg)
}

func (p *prom) samples(sel string) []judge.ThermalSample {
	temp := p.series(`spark_gpu_temperature_celsius{` + sel + `}`)
	power := p.series(`spark_gpu_power_watts{` + sel + `}`)
	util := p.series(`spark_gpu_utilization_ratio{` + sel + `}`)
	clock := p.series(`spark_gpu_sm_clock_hertz{` + sel + `}`)
	// The CSV reader's plausibility rules: a reading no GPU gives is no
	// reading, whichever source it comes from.
	in := func(v, lo, hi float64) bool { return v >= lo && v <= hi }
	var samples []judge.ThermalSample
	for _, t := range sortedTimes(temp) {
		w, ok := power[t]
		if !ok || !in(temp[t], thermallog.MinTemperature, thermallog.MaxTemperature) || !in(w, 0, thermallog.MaxPower) {
			continue
		}
		s := judge.ThermalSample{Time: t, Temperature: temp[t], Power: w}
		if v, ok := util[t]; ok && in(v, 0, 1) {
			s.Utilization = ptr(v)
		}
		if v, ok := clock[t]; ok && in(v, 0, thermallog.MaxSMClockHz) {
			s.SMClock = ptr(v)
		}
		samples = append(samples, s)
	}
	return samples
}

// throttle: covered is false when no verdict judged a whole window.
func (p *prom) throttle(sel string, samples []judge.ThermalSample, cfg judge.ThermalConfig) (episodes *episodeLog, throttled time.Duration, from string, covered bool) {
	from, covered = "recorded", true
	episodes = newEpisodeLog()
	counted := p.slowdownCounted(sel, episodes.add)
	state := p.series(`spark_thermal_state{` + sel + `,state="throttled"}`)
	if len(state) > 0 {
		if collecting := p.series(`spark_thermal_state{` + sel + `,state="collecting"}`); len(collecting) > 0 {
			covered = false
			for _, v := range collecting {
				covered = covered || v == 0
			}
		}
		signature := p.series(`spark_thermal_throttle_signature{` + sel + `}`)
		slowdown := p.series(`max(spark_gpu_clocks_event_active{` + sel + `,reason=~"sw_thermal_slowdown|hw_thermal_slowdown"}) ` +
			`or sum(irate(spark_gpu_clocks_event_seconds_total{` + sel + `,reason=~"sw_thermal_slowdown|hw_thermal_slowdown"}[5m])) > bool 0`)
		recordedEpisodes(state, signature, slowdown, counted)
		throttled = episodes.length
		if secs, ok := p.growth(`spark_thermal_throttled_seconds_total{` + sel + `}`); ok {
			throttled = time.Duration(min(secs, p.seconds()) * float64(time.Second))
		}
	} else if err := cfg.Validate(); err == nil {
		from = "replay"
		throttled, covered = replay(samples, cfg, counted)
	}
	return episodes, throttled, from, covered
}

// slowdownCounted makes one query for the whole range, however many episodes there are.
func (p *prom) slowdownCounted(sel string, each func(Episode)) func(Episode) {
	var counters model.Matrix
	asked := false
	return func(e Episode) {
		if !asked {
			counters, asked = p.raw(`spark_gpu_clocks_event_seconds_total{`+sel+`,reason=~"sw_thermal_slowdown|hw_thermal_slowdown"}`, p.q.From, p.q.To), true
		}
		// The SW and the HW counter each grow at most as fast as time.
		if secs, ok := growthIn(counters, e.Start, e.End); ok && secs <= 2*e.length().Seconds() {
			e.ThermalSlowdownSeconds = ptr(round(secs))
			if secs > 0 && !strings.Contains(e.Evidence, "thermal_slowdown_counters") {
				// As the live collector names it.
				e.Evidence = strings.TrimPrefix(e.Evidence+"+thermal_slowdown_counters", "+")
			}
		}
		each(e)
	}
}

func (p *prom) memory(inst string) *Memory {
	m := &Memory{Contention: []Span{}, PlansStoppedFitting: []PlanMissed{}}
	m.LowestHeadroomBytes = p.scalar(`min_over_time(spark_pool_headroom_bytes{` + inst + `}` + p.span + `)`)
	m.LowestHeadroomAfterFlushBytes = p.scalar(`min_over_time(spark_pool_headroom_after_flush_bytes{` + inst + `}` + p.span + `)`)
	m.PageCachePeakBytes = p.scalar(`max_over_time(spark_pool_page_cache_bytes{` + inst + `}` + p.span + `)`)
	if kills, ok := p.growth(`spark_pool_oom_kills_total{` + inst + `}`); ok && kills < 1e9 {
		m.OOMKills = ptr(int(math.Round(kills)))
	}
	// Stalled no longer than the run.
	if stall, ok := p.growth(`spark_pool_pressure_stall_seconds_total{` + inst + `,kind="full"}`); ok && stall <= p.seconds() {
		m.StallMinutes = ptr(round(stall / 60))
	}
	contention := spanListing()
	spans(sortedTimes(p.series(`(max(spark_workloads{`+inst+`,role="training"}) > 0) and (max(spark_workloads{`+inst+`,role="inference"}) > 0)`)), p.q.Step, contention.add)
	m.Contention, m.ContentionLeftOut = contention.list()
	for plan, times := range p.labelled(`spark_plan_required_bytes{`+inst+`} > on(instance) group_left() spark_pool_headroom_after_flush_bytes{`+inst+`}`, "plan") {
		m.PlansStoppedFitting = append(m.PlansStoppedFitting, PlanMissed{Plan: plan, Start: times[0]})
	}
	sort.Slice(m.PlansStoppedFitting, func(i, j int) bool { return m.PlansStoppedFitting[i].Plan < m.PlansStoppedFitting[j].Plan })
	return m
}

// prom keeps the first error; the rest return nothing.
type prom struct {
	ctx     context.Context
	api     v1.API
	q       Query
	span    string // the whole range as a range selector: [21600s]
	err     error
	leftOut int
}

func (p *prom) seconds() float64 { return p.q.To.Sub(p.q.From).Seconds() }

func (p *prom) query(expr string, at time.Time) model.Value {
	if p.err != nil {
		return nil
	}
	v, _, _, err := p.api.Query(p.ctx, expr, at)
	if err != nil {
		p.err = fmt.Errorf("query %s: %w", expr, err)
	}
	return v
}

func (p *prom) matrix(expr string) model.Matrix {
	if p.err != nil {
		return nil
	}
	v, _, _, err := p.api.QueryRange(p.ctx, expr, v1.Range{Start: p.q.From, End: p.q.To, Step: p.q.Step})
	if err != nil {
		p.err = fmt.Errorf("query %s: %w", expr, err)
		return nil
	}
	m, _ := v.(model.Matrix)
	return p.points(m, p.q.From, p.q.To)
}

// points: whatever the server, no figure or time comes from outside what was asked for.
func (p *prom) points(m model.Matrix, from, to time.Time) model.Matrix {
	lo, hi := model.TimeFromUnixNano(from.UnixNano()), model.TimeFromUnixNano(to.UnixNano())
	for _, s := range m {
		kept := s.Values[:0]
		for _, v := range s.Values {
			if v.Timestamp >= lo && v.Timestamp <= hi && finite(float64(v.Value)) {
				kept = append(kept, v)
			} else {
				p.leftOut++
			}
		}
		slices.SortStableFunc(kept, func(a, b model.SamplePair) int { return cmp.Compare(a.Timestamp, b.Timestamp) })
		s.Values = kept
	}
	return m
}

func (p *prom) series(expr string) map[time.Time]float64 {
	out := map[time.Time]float64{}
	m := p.matrix(expr)
	if len(m) == 0 {
		return out
	}
	for _, s := range m[0].Values {
		out[s.Timestamp.Time()] = float64(s.Value)
	}
	return out
}

func (p *prom) labelled(expr, label string) map[string][]time.Time {
	out := map[string][]time.Time{}
	for _, s := range p.matrix(expr) {
		name := string(s.Metric[model.LabelName(label)])
		for _, v := range s.Values {
			out[name] = append(out[name], v.Timestamp.Time())
		}
	}
	return out
}

func (p *prom) scalar(expr string) *float64 {
	vec, _ := p.query(expr, p.q.To).(model.Vector)
	// An exabyte and more is no figure of a Spark's pool either.
	if len(vec) == 0 || !finite(float64(vec[0].Value)) || math.Abs(float64(vec[0].Value)) > 1e18 {
		return nil
	}
	return ptr(float64(vec[0].Value))
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// growth reads raw samples, not increase(), which extrapolates: one OOM
// kill is 1, not 1.5.
func (p *prom) growth(sel string) (float64, bool) {
	return p.growthBetween(sel, p.q.From, p.q.To)
}

func (p *prom) growthBetween(sel string, from, to time.Time) (float64, bool) {
	return growthIn(p.raw(sel, from, to), from, to)
}

func (p *prom) raw(sel string, from, to time.Time) model.Matrix {
	secs := int(math.Ceil(to.Sub(from).Seconds()))
	if secs < 1 {
		secs = 1
	}
	m, _ := p.query(fmt.Sprintf("%s[%ds]", sel, secs), to).(model.Matrix)
	return p.points(m, to.Add(-time.Duration(secs)*time.Second), to)
}

// growthIn: a reset counts from zero; a value below zero is none of a counter's.
func growthIn(m model.Matrix, from, to time.Time) (float64, bool) {
	if len(m) == 0 {
		return 0, false
	}
	var total float64
	found := false
	for _, s := range m {
		prev := math.NaN()
		for _, v := range s.Values {
			cur := float64(v.Value)
			if at := v.Timestamp.Time(); !finite(cur) || cur < 0 || at.Before(from) || at.After(to) {
				continue
			}
			found = true
			if !math.IsNaN(prev) {
				if cur >= prev {
					total += cur - prev
				} else {
					total += cur
				}
			}
			prev = cur
		}
	}
	if !found || !finite(total) {
		return 0, false
	}
	return total, true
}

func (p *prom) onlyInstance() (string, error) {
	vec, _ := p.query(`group by (instance) (last_over_time(spark_exporter_build_info`+p.span+`))`, p.q.To).(model.Vector)
	if p.err != nil {
		return "", p.err
	}
	var names []string
	for _, s := range vec {
		names = append(names, string(s.Metric["instance"]))
	}
	sort.Strings(names)
	switch len(names) {
	case 1:
		return names[0], nil
	case 0:
		return "", fmt.Errorf("%w: no spark_exporter in that time range", ErrInstance)
	}
	return "", fmt.Errorf("%w: several Sparks in that time range, choose one of %s", ErrInstance, strings.Join(names, ", "))
}

func (p *prom) alerts(inst string) (out []Alert, leftOut int) {
	out = []Alert{}
	for _, s := range p.matrix(`ALERTS{` + inst + `,alertstate="firing"}`) {
		stretches := spanListing()
		spans(pointTimes(s.Values), p.q.Step, stretches.add)
		kept, n := stretches.list()
		leftOut += n
		for _, sp := range kept {
			out = append(out, Alert{Name: string(s.Metric["alertname"]), Severity: string(s.Metric["severity"]),
				GPU: string(s.Metric["gpu"]), Start: sp.Start, End: sp.End})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].Start.Equal(out[j].Start) {
			return out[i].Start.Before(out[j].Start)
		}
		return out[i].Name < out[j].Name
	})
	return out, leftOut
}

func pointTimes(values []model.SamplePair) []time.Time {
	times := make([]time.Time, len(values))
	for i, v := range values {
		times[i] = v.Timestamp.Time()
	}
	return times
}

func recordedEpisodes(state, signature, slowdown map[time.Time]float64, each func(Episode)) {
	var open *Episode
	done := func() {
		open.Evidence = evidenceName(open.Signature, open.NVML)
		each(*open)
		open = nil
	}
	for _, t := range sortedTimes(state) {
		if state[t] == 1 {
			if open == nil {
				open = &Episode{Start: t, Open: true}
			}
			open.End = t
			open.Signature = open.Signature || signature[t] == 1
			open.NVML = open.NVML || slowdown[t] == 1
			continue
		}
		if open != nil {
			open.End, open.Open = t, false
			done()
		}
	}
	if open != nil {
		done()
	}
}

func evidenceName(signature, nvml bool) string {
	return judge.ThermalEpisode{Signature: signature, NVMLSlowdown: nvml}.Evidence()
}

// spans: stretches no more than 1.5 steps apart.
func spans(times []time.Time, step time.Duration, each func(Span)) {
	var cur Span
	for i, t := range times {
		if i > 0 && t.Sub(cur.End) <= step*3/2 {
			cur.End = t
			continue
		}
		if i > 0 {
			each(cur)
		}
		cur = Span{Start: t, End: t}
	}
	if len(times) > 0 {
		each(cur)
	}
}

func sortedTimes(m map[time.Time]float64) []time.Time {
	out := make([]time.Time, 0, len(m))
	for t := range m {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return out
}
