package flight

import (
	"encoding/json"
	"fmt"
	"html"
	"io"
	"math"
	"strings"
	"time"
)

// Summary is what `spark_exporter report --flight` prints: one boot's
// records in a window, digested.
type Summary struct {
	// Boot is the boot's index relative to the running one (0 the
	// running boot, -1 the one before); Clean its end.
	Boot    int       `json:"boot"`
	Clean   bool      `json:"clean_shutdown"`
	From    time.Time `json:"from"`
	To      time.Time `json:"to"`
	Records int       `json:"records"`
	Damaged int       `json:"damaged_slots"`
	Verdict string    `json:"verdict"`
	// Usable memory (as Usable reads it): first, last, lowest and its slope.
	UsableFirst  *uint64   `json:"usable_first_bytes,omitempty"`
	UsableLast   *uint64   `json:"usable_last_bytes,omitempty"`
	UsableLowest *uint64   `json:"usable_lowest_bytes,omitempty"`
	UsableLowAt  time.Time `json:"usable_lowest_at"`
	// UsableSlope is bytes per minute over the window (negative: falling).
	UsableSlope *float64 `json:"usable_slope_bytes_per_minute,omitempty"`
	// PressureSome/Full: the share of the window tasks stalled on memory.
	PressureSome *float64 `json:"pressure_some_ratio,omitempty"`
	PressureFull *float64 `json:"pressure_full_ratio,omitempty"`
	// Grew is the workload whose resident memory grew most, if any grew.
	Grew *Growth `json:"grew,omitempty"`
	// GPU is the last record's GPU reading.
	GPU    *GPU    `json:"gpu,omitempty"`
	Events []Event `json:"events"`
	// Samples are the usable figures over time, for the SVG.
	Samples []Sample `json:"-"`
	loc     *time.Location
}

// Growth is a workload's resident memory at the window's ends.
type Growth struct {
	Role       string `json:"role"`
	Kind       string `json:"kind"`
	FirstBytes uint64 `json:"first_bytes"`
	LastBytes  uint64 `json:"last_bytes"`
}

// Sample is one record's usable memory.
type Sample struct {
	At     time.Time
	Usable uint64
}

// Summarise digests recs (one boot's, oldest first, non-empty).
func Summarise(boot Boot, recs []Record, index, damaged int, loc *time.Location) Summary {
	s := Summary{Boot: index, Clean: boot.Clean(), Records: len(recs), Damaged: damaged, loc: loc, Events: Events(recs)}
	if len(recs) == 0 {
		return s
	}
	s.From, s.To = recs[0].Time, recs[len(recs)-1].Time
	win := Boot{ID: boot.ID, Records: recs}
	s.Verdict = Verdict(win, s.To.Sub(s.From)+time.Millisecond, loc)
	if !boot.Clean() && len(recs) > 0 && recs[len(recs)-1].Clean {
		s.Clean = true
	}
	var first, last *Record
	for i := range recs {
		r := &recs[i]
		u, ok := r.Usable()
		if !ok {
			continue
		}
		s.Samples = append(s.Samples, Sample{r.Time, u})
		if first == nil {
			first = r
		}
		last = r
		if s.UsableLowest == nil || u < *s.UsableLowest {
			v := u
			s.UsableLowest, s.UsableLowAt = &v, r.Time
		}
	}
	if first != nil {
		a, _ := first.Usable()
		b, _ := last.Usable()
		s.UsableFirst, s.UsableLast = &a, &b
		if m := last.Time.Sub(first.Time).Minutes(); m > 0 {
			slope := (float64(b) - float64(a)) / m
			s.UsableSlope = &slope
		}
	}
	s.PressureSome, s.PressureFull = pressureShares(recs)
	s.Grew = grew(recs)
	if g := recs[len(recs)-1].GPU; g != nil {
		s.GPU = g
	}
	return s
}

func pressureShares(recs []Record) (some, full *float64) {
	var a, b *Record
	for i := range recs {
		if recs[i].Pressure != nil {
			if a == nil {
				a = &recs[i]
			}
			b = &recs[i]
		}
	}
	if a == nil || a == b {
		return nil, nil
	}
	span := float64(b.Time.Sub(a.Time).Microseconds())
	if span <= 0 || b.Pressure.Some < a.Pressure.Some {
		return nil, nil
	}
	v := float64(b.Pressure.Some-a.Pressure.Some) / span
	some = &v
	if a.Pressure.Full != nil && b.Pressure.Full != nil && *b.Pressure.Full >= *a.Pressure.Full {
		f := float64(*b.Pressure.Full-*a.Pressure.Full) / span
		full = &f
	}
	return some, full
}

func grew(recs []Record) *Growth {
	first := map[[2]string]uint64{}
	for _, r := range recs {
		for _, w := range r.Workloads {
			k := [2]string{w.Role, w.Kind}
			if _, ok := first[k]; !ok {
				first[k] = w.ResidentBytes
			}
		}
	}
	var best *Growth
	for _, w := range recs[len(recs)-1].Workloads {
		f := first[[2]string{w.Role, w.Kind}]
		if w.ResidentBytes > f && (best == nil || w.ResidentBytes-f > best.LastBytes-best.FirstBytes) {
			best = &Growth{Role: w.Role, Kind: w.Kind, FirstBytes: f, LastBytes: w.ResidentBytes}
		}
	}
	return best
}

func (s Summary) clock(t time.Time) string { return t.In(s.loc).Format("15:04:05") }

// WriteText prints the summary for a terminal.
func (s Summary) WriteText(w io.Writer) error {
	var b strings.Builder
	which := map[int]string{0: "the running boot", -1: "the previous boot"}[s.Boot]
	if which == "" {
		which = fmt.Sprintf("boot %d", s.Boot)
	}
	end := "ended without a clean shutdown"
	if s.Clean {
		end = "the exporter stopped cleanly"
	}
	if s.Boot == 0 && !s.Clean {
		end = "still recording"
	}
	fmt.Fprintf(&b, "Flight recorder, %s: %s to %s, %d records; %s.\n", which,
		s.From.In(s.loc).Format("2006-01-02 15:04:05"), s.clock(s.To), s.Records, end)
	fmt.Fprintf(&b, "Verdict: %s.\n", s.Verdict)
	if s.UsableFirst != nil {
		fmt.Fprintf(&b, "Usable memory: %s to %s", GiB(*s.UsableFirst), GiB(*s.UsableLast))
		if s.UsableSlope != nil {
			fmt.Fprintf(&b, " (%+.2f GiB a minute)", *s.UsableSlope/(1<<30))
		}
		fmt.Fprintf(&b, ", lowest %s at %s.\n", GiB(*s.UsableLowest), s.clock(s.UsableLowAt))
	}
	if s.PressureSome != nil {
		fmt.Fprintf(&b, "Memory pressure: some %.1f%% of the time", 100**s.PressureSome)
		if s.PressureFull != nil {
			fmt.Fprintf(&b, ", full %.1f%%", 100**s.PressureFull)
		}
		b.WriteString(".\n")
	}
	if g := s.Grew; g != nil {
		fmt.Fprintf(&b, "Grew most: %s %s, %s to %s.\n", g.Role, g.Kind, GiB(g.FirstBytes), GiB(g.LastBytes))
	}
	if g := s.GPU; g != nil {
		fmt.Fprintf(&b, "GPU at the end: %s.\n", gpuText(*g))
	}
	if len(s.Events) == 0 {
		b.WriteString("Kernel events: none recorded.\n")
	} else {
		b.WriteString("Kernel events:\n")
		for _, ev := range s.Events {
			fmt.Fprintf(&b, "  %s %s\n", s.clock(ev.At), ev.What)
		}
	}
	if s.Damaged > 0 {
		fmt.Fprintf(&b, "Damaged records skipped: %d (a write cut by the end, or a damaged disk).\n", s.Damaged)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func gpuText(g GPU) string {
	var parts []string
	if !math.IsNaN(g.TemperatureCelsius) {
		parts = append(parts, fmt.Sprintf("%.0f °C", g.TemperatureCelsius))
	}
	if !math.IsNaN(g.PowerWatts) {
		parts = append(parts, fmt.Sprintf("%.0f W", g.PowerWatts))
	}
	if !math.IsNaN(g.SMClockHertz) {
		parts = append(parts, fmt.Sprintf("SM %.0f MHz", g.SMClockHertz/1e6))
	}
	if g.State != "" {
		parts = append(parts, g.State)
	}
	if len(parts) == 0 {
		return "no reading"
	}
	return strings.Join(parts, ", ")
}

// WriteJSON prints the summary as one JSON object (docs/report.md).
func (s Summary) WriteJSON(w io.Writer) error {
	type gpu struct {
		TemperatureCelsius *float64 `json:"temperature_celsius,omitempty"`
		PowerWatts         *float64 `json:"power_watts,omitempty"`
		SMClockHertz       *float64 `json:"sm_clock_hertz,omitempty"`
		State              string   `json:"state,omitempty"`
	}
	num := func(v float64) *float64 {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil
		}
		return &v
	}
	out := struct {
		Summary
		GPU *gpu `json:"gpu,omitempty"`
	}{Summary: s}
	if s.GPU != nil {
		out.GPU = &gpu{num(s.GPU.TemperatureCelsius), num(s.GPU.PowerWatts), num(s.GPU.SMClockHertz), s.GPU.State}
	}
	if out.Events == nil {
		out.Events = []Event{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// MarshalJSON names an event's fields.
func (e Event) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		At   time.Time `json:"at"`
		What string    `json:"what"`
	}{e.At, e.What})
}

// WriteSVG draws usable memory over the window, the kernel events as
// marked lines, the verdict as the title.
func (s Summary) WriteSVG(w io.Writer) error {
	const width, height, left, top, plotW, plotH = 800, 320, 70, 40, 700, 220
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<title>%s</title>`+"\n", html.EscapeString(s.Verdict))
	fmt.Fprintf(&b, `<text x="%d" y="20" font-size="13">%s</text>`+"\n", left, html.EscapeString(truncate(s.Verdict, 110)))
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#888"/>`+"\n", left, top, plotW, plotH)
	span := s.To.Sub(s.From).Seconds()
	var hi uint64 = 1
	for _, p := range s.Samples {
		hi = max(hi, p.Usable)
	}
	x := func(t time.Time) float64 {
		if span <= 0 {
			return left
		}
		return left + plotW*t.Sub(s.From).Seconds()/span
	}
	y := func(v uint64) float64 { return top + plotH*(1-float64(v)/float64(hi)) }
	if len(s.Samples) > 0 {
		b.WriteString(`<polyline fill="none" stroke="#1f77b4" stroke-width="2" points="`)
		for i, p := range s.Samples {
			if i > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%.1f,%.1f", x(p.At), y(p.Usable))
		}
		b.WriteString(`"/>` + "\n")
	}
	fmt.Fprintf(&b, `<text x="4" y="%d">%s</text>`+"\n", top+10, GiB(hi))
	fmt.Fprintf(&b, `<text x="4" y="%d">0 GiB</text>`+"\n", top+plotH)
	fmt.Fprintf(&b, `<text x="%d" y="%d">usable memory</text>`+"\n", left+4, top+14)
	for _, ev := range s.Events {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#d62728" stroke-dasharray="4 3"><title>%s %s</title></line>`+"\n",
			x(ev.At), top, x(ev.At), top+plotH, s.clock(ev.At), html.EscapeString(ev.What))
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text><text x="%d" y="%d" text-anchor="end">%s</text>`+"\n",
		left, top+plotH+16, s.clock(s.From), left+plotW, top+plotH+16, s.clock(s.To))
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
