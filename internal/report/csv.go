package report

import (
	"fmt"
	"sort"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/judge"
	"github.com/spark-exporter/spark_exporter/internal/thermal"
	"github.com/spark-exporter/spark_exporter/internal/thermallog"
)

// FromLog reports on a parsed thermal log. cfg is the analysis's
// configuration but for its Interval, which is the log's own cadence (the
// median time between its rows). With an index column, gpu selects the
// GPU (nil: the lowest index in the log).
func FromLog(tr thermallog.Trace, cfg judge.ThermalConfig, gpu *int) (Report, error) {
	rows, index := selectGPU(tr.Rows, gpu)
	var samples []judge.ThermalSample
	for _, row := range rows {
		if s := thermal.SampleOf(row); s != nil {
			samples = append(samples, *s)
		}
	}
	if interval, ok := cadence(samples); ok {
		cfg.Interval = interval
	}
	if err := cfg.Validate(); err != nil {
		return Report{}, fmt.Errorf("the log's samples come every %v: %w", cfg.Interval, err)
	}
	replayed := thermal.Replay(samples, cfg)
	var episodes []Episode
	for _, e := range replayed.Episodes {
		ep := Episode{Start: e.Start, End: e.End, Open: e.Open, Evidence: e.Evidence()}
		ep.ThermalSlowdownSeconds = slowdownGrowth(rows, e.Start, e.End)
		episodes = append(episodes, ep)
	}
	// The samples the Monitor took, in time order (a log whose clock
	// stepped back has samples it left out).
	var taken []judge.ThermalSample
	for _, st := range replayed.Steps {
		if st.Sample != nil {
			taken = append(taken, *st.Sample)
		}
	}
	r := build(taken, episodes, replayed.Throttled, nil, cfg)
	r.Source, r.Throttle.From = "csv", "replay"
	r.GPU = index
	for _, e := range tr.Skipped {
		r.SkippedLines = append(r.SkippedLines, SkippedLine{Line: e.Line, Error: e.Err.Error()})
	}
	r.Verdict = verdict(r)
	return r, nil
}

// selectGPU keeps the rows of one GPU of a log with an index column; rows
// without an index (a log without the column) are all kept.
func selectGPU(rows []thermallog.Row, gpu *int) ([]thermallog.Row, int) {
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
	return out, max(index, 0)
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

// thermalReasons are the clock event reasons that are heat.
var thermalReasons = []string{"sw_thermal_slowdown", "hw_thermal_slowdown"}

// slowdownGrowth is how much the driver's thermal slowdown counters grew
// from the first row at or after start to the last at or before end; nil
// when the log has no such counter there.
func slowdownGrowth(rows []thermallog.Row, start, end time.Time) *float64 {
	var total float64
	found := false
	for _, reason := range thermalReasons {
		first, last, ok := -1.0, -1.0, false
		for _, r := range rows {
			v, has := r.EventSeconds[reason]
			if !has || r.Time.Before(start) || r.Time.After(end) {
				continue
			}
			if !ok {
				first, ok = v, true
			}
			last = v
		}
		if ok && last >= first {
			total += last - first
			found = true
		}
	}
	if !found {
		return nil
	}
	return &total
}
