package status

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// View is the page's refreshed figures, rendered by the Go code that renders
// the page: page.js only puts them in place by data-k (the model's paths).
type View struct {
	// When Shape differs from the page's, page.js loads the page again.
	Shape    string               `json:"shape"`
	Text     map[string]string    `json:"text"`
	State    map[string]string    `json:"state"`
	Value    map[string]string    `json:"value"` // a <data> element's value attribute
	Lists    map[string][]string  `json:"lists"`
	Charts   map[string]chartView `json:"charts"`
	Bar      []barSegment         `json:"bar"`
	BarTitle string               `json:"bar_title"`
}

type chartView struct {
	Points string   `json:"points"`
	Lines  []string `json:"lines"` // the y of each marked value
	Lo     string   `json:"lo"`
	Hi     string   `json:"hi"`
	Desc   string   `json:"desc"`
}

type barSegment struct {
	X     string `json:"x"`
	Width string `json:"width"`
}

func (v View) T(key string) string { return v.Text[key] }

func (v View) S(key string) string { return v.State[key] }

func (v View) V(key string) string { return v.Value[key] }

func newView(m Model) View {
	v := View{Shape: shape(m), Text: map[string]string{}, State: map[string]string{}, Value: map[string]string{},
		Lists: map[string][]string{}, Charts: map[string]chartView{}}
	v.Text["generated_at"] = m.GeneratedAt
	if p := m.Pool; p != nil {
		v.addPool(p)
	}
	for gi, g := range m.GPUs {
		v.addGPU("gpus."+strconv.Itoa(gi)+".", g)
	}
	if w := m.Workloads; w != nil {
		v.addWorkloads(w, generatedAt(m))
	}
	if pl := m.Plans; pl != nil {
		for i, p := range pl.List {
			k := "plans.list." + strconv.Itoa(i) + "."
			v.State[k+"state"] = p.State
			v.Text[k+"text"] = p.Text
		}
	}
	if f := m.Fabric; f != nil {
		v.verdict("fabric.state", f.State, f.Text)
	}
	if f := m.Flight; f != nil {
		v.verdict("flight.state", f.State, f.Text)
	}
	v.verdict("nvml.state", m.NVML.State, m.NVML.Text)
	for i, c := range m.Collectors {
		k := "collectors." + strconv.Itoa(i)
		state := "failing"
		if c.Success {
			state = "ok"
		}
		v.State[k] = state
		v.Text[k+".success"] = state
		v.Text[k+".duration_seconds"] = milliseconds(c.DurationSeconds)
	}
	return v
}

func (v *View) verdict(key, state, text string) { v.State[key], v.Text[key] = state, text }

func (v *View) bytes(key string, b int64) {
	v.Text[key], v.Value[key] = gib(b), strconv.FormatInt(b, 10)
}

func (v *View) optional(key string, x *float64, format func(float64) string) {
	v.Text[key] = "not reported"
	if x != nil {
		v.Text[key] = format(*x)
	}
}

func (v *View) addPool(p *Pool) {
	v.verdict("pool.state", p.State, p.Text)
	v.Text["pool.oom_ladder_step"] = p.OOMLadderStep
	var title []string
	for i, s := range p.Bar {
		v.bytes(fmt.Sprintf("pool.bar.%d.bytes", i), s.Bytes)
		v.Bar = append(v.Bar, barSegment{X: barX(p, i), Width: barWidth(p, i)})
		title = append(title, s.Label+" "+gib(s.Bytes))
	}
	v.BarTitle = "The pool of " + gib(p.TotalBytes) + ": " + strings.Join(title, ", ") + "."
	v.bytes("pool.usable_bytes", p.UsableBytes)
	v.State["pool.usable_tier"], v.Text["pool.usable_tier"] = p.UsableTier, p.UsableTier
	v.bytes("pool.total_bytes", p.TotalBytes)
	v.bytes("pool.free_bytes", p.FreeBytes)
	v.bytes("pool.headroom_bytes", p.HeadroomBytes)
	v.bytes("pool.headroom_after_flush_bytes", p.HeadroomAfterFlushBytes)
	v.Text["pool.large_free_bytes"] = largeBlocks(p)
	v.Lists["pool.notes"] = p.Notes
}

func (v *View) addGPU(k string, g GPU) {
	if t := g.Thermal; t != nil {
		v.verdict(k+"thermal.state", t.State, t.Text)
		v.Lists[k+"thermal.evidence"] = t.Evidence
		v.Text[k+"thermal.episodes"] = strconv.Itoa(t.Episodes)
		v.Text[k+"thermal.throttled_seconds"] = duration(secondsDuration(t.ThrottledSeconds))
		for _, kind := range chartKinds {
			c := newChart(kind, g)
			cv := chartView{Points: c.Points, Lo: c.Lo, Hi: c.Hi, Desc: c.Desc, Lines: []string{}}
			for _, l := range c.Lines {
				cv.Lines = append(cv.Lines, l.Y)
			}
			v.Charts[c.ID] = cv
		}
	}
	v.optional(k+"temperature_celsius", g.TemperatureCelsius, celsius)
	v.optional(k+"power_watts", g.PowerWatts, watts)
	v.optional(k+"sm_clock_hertz", g.SMClockHertz, mhz)
	v.optional(k+"utilization_ratio", g.UtilizationRatio, percent)
	v.Text[k+"clock_events"] = "none"
	if len(g.ClockEvents) > 0 {
		v.Text[k+"clock_events"] = strings.Join(g.ClockEvents, ", ")
	}
}

func (v *View) addWorkloads(w *Workloads, now time.Time) {
	v.verdict("workloads.state", w.State, w.Text)
	for i, x := range w.List {
		k := "workloads.list." + strconv.Itoa(i) + "."
		v.Text[k+"resident_bytes"] = "not read"
		if x.ResidentBytes != nil {
			v.Text[k+"resident_bytes"] = gib(*x.ResidentBytes)
		}
		v.Text[k+"cap"] = capCell(x.Cap)
		v.Text[k+"container"] = containerCell(x)
		v.Text[k+"engine"] = engineCell(x, now)
	}
}

var chartKinds = []string{"temperature", "power", "clock"}

func capCell(c *Cap) string {
	switch {
	case c == nil:
		return "none (uncapped)"
	case c.Source == "default":
		return percent(c.Ratio) + " (default)"
	}
	return percent(c.Ratio)
}

func largeBlocks(p *Pool) string {
	if p.LargeFreeBytes == nil {
		return "not known"
	}
	return gib(*p.LargeFreeBytes) + compactionText(p)
}

func compactionText(p *Pool) string {
	if r := p.CompactionFailuresPerSecond; r != nil {
		return fmt.Sprintf("; compaction failing %.1f times a second", *r)
	}
	return ""
}
