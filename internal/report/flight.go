package report

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/flight"
)

const (
	maxFlightSamples   = 4096
	maxFlightWorkloads = 4096
)

// Flight digests one boot's flight records for `report --flight`, fed
// oldest first (Add), keeping what its text, JSON and SVG say.
type Flight struct {
	boot, damaged, records int
	bootClean              bool
	loc                    *time.Location
	first, last            flight.Record
	digest                 flight.Digest
	usableFirst, usableLow *flightSample
	usableLast             flightSample
	pressure               [2]flight.Record // the first and last with a reading
	pressures              int
	firstSeen              map[[2]string]uint64
	samples                thinned
}

// NewFlight: index is 0 for the running boot, -1 the one before.
func NewFlight(boot flight.Boot, index, damaged int, loc *time.Location) *Flight {
	return &Flight{boot: index, damaged: damaged, bootClean: boot.Clean(), loc: loc,
		firstSeen: map[[2]string]uint64{}, samples: thinned{every: 1}}
}

func (f *Flight) Records() int { return f.records }

func (f *Flight) Add(r flight.Record) {
	if f.records == 0 {
		f.first = r
	}
	f.records++
	f.last = r
	f.digest.Add(r)
	if u, ok := r.Usable(); ok {
		s := flightSample{r.Time, u}
		f.samples.add(s)
		if f.usableFirst == nil {
			f.usableFirst = &s
		}
		f.usableLast = s
		if f.usableLow == nil || u < f.usableLow.Usable {
			f.usableLow = &s
		}
	}
	if r.Pressure != nil {
		f.pressure[min(f.pressures, 1)] = r
		f.pressures++
	}
	for _, w := range r.Workloads {
		k := [2]string{w.Role, w.Kind}
		if _, ok := f.firstSeen[k]; !ok && len(f.firstSeen) < maxFlightWorkloads {
			f.firstSeen[k] = w.ResidentBytes
		}
	}
}

type flightSummary struct {
	Boot         int       `json:"boot"`
	Clean        bool      `json:"clean_shutdown"`
	From         time.Time `json:"from"`
	To           time.Time `json:"to"`
	Records      int       `json:"records"`
	Damaged      int       `json:"damaged_slots"`
	Verdict      string    `json:"verdict"`
	UsableFirst  *uint64   `json:"usable_first_bytes,omitempty"`
	UsableLast   *uint64   `json:"usable_last_bytes,omitempty"`
	UsableLowest *uint64   `json:"usable_lowest_bytes,omitempty"`
	UsableLowAt  time.Time `json:"usable_lowest_at"`
	// UsableSlope is bytes per minute over the window (negative: falling).
	UsableSlope   *float64      `json:"usable_slope_bytes_per_minute,omitempty"`
	PressureSome  *float64      `json:"pressure_some_ratio,omitempty"`
	PressureFull  *float64      `json:"pressure_full_ratio,omitempty"`
	Grew          *growth       `json:"grew,omitempty"`
	GPU           *flight.GPU   `json:"-"`
	Events        []flightEvent `json:"events"`
	EventsLeftOut int           `json:"events_left_out,omitempty"`
	samples       []flightSample
	loc           *time.Location
}

type growth struct {
	Role       string `json:"role"`
	Kind       string `json:"kind"`
	FirstBytes uint64 `json:"first_bytes"`
	LastBytes  uint64 `json:"last_bytes"`
}

type flightEvent struct {
	At   time.Time `json:"at"`
	What string    `json:"what"`
}

type flightSample struct {
	At     time.Time
	Usable uint64
}

func (f *Flight) summary() flightSummary {
	s := flightSummary{Boot: f.boot, Clean: f.bootClean || f.last.Clean, Records: f.records, Damaged: f.damaged,
		loc: f.loc, Events: []flightEvent{}, EventsLeftOut: f.digest.EventsLeftOut}
	for _, ev := range f.digest.Events() {
		s.Events = append(s.Events, flightEvent{ev.At, ev.What})
	}
	if f.records == 0 {
		return s
	}
	s.From, s.To = f.first.Time, f.last.Time
	s.Verdict = f.digest.Verdict(f.loc)
	if a, b := f.usableFirst, f.usableLast; a != nil {
		s.UsableFirst, s.UsableLast = &a.Usable, &b.Usable
		s.UsableLowest, s.UsableLowAt = &f.usableLow.Usable, f.usableLow.At
		if m := b.At.Sub(a.At).Minutes(); m > 0 {
			slope := (float64(b.Usable) - float64(a.Usable)) / m
			s.UsableSlope = &slope
		}
	}
	if f.pressures > 1 {
		s.PressureSome, s.PressureFull = pressureShares(f.pressure[0], f.pressure[1])
	}
	s.Grew = f.grew()
	s.GPU = f.last.GPU
	s.samples = f.samples.list()
	return s
}

func pressureShares(a, b flight.Record) (some, full *float64) {
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

func (f *Flight) grew() *growth {
	var best *growth
	for _, w := range f.last.Workloads {
		first, ok := f.firstSeen[[2]string{w.Role, w.Kind}]
		if ok && w.ResidentBytes > first && (best == nil || w.ResidentBytes-first > best.LastBytes-best.FirstBytes) {
			best = &growth{Role: w.Role, Kind: w.Kind, FirstBytes: first, LastBytes: w.ResidentBytes}
		}
	}
	return best
}

// thinned keeps the lowest of each run, the runs doubling.
type thinned struct {
	kept     []flightSample
	every, n int
	low      flightSample
}

func (t *thinned) add(s flightSample) {
	if t.n == 0 || s.Usable < t.low.Usable {
		t.low = s
	}
	if t.n++; t.n < t.every {
		return
	}
	t.kept, t.n = append(t.kept, t.low), 0
	if len(t.kept) == maxFlightSamples {
		for i := range maxFlightSamples / 2 {
			a, b := t.kept[2*i], t.kept[2*i+1]
			if b.Usable < a.Usable {
				a = b
			}
			t.kept[i] = a
		}
		t.kept, t.every = t.kept[:maxFlightSamples/2], 2*t.every
	}
}

func (t *thinned) list() []flightSample {
	if t.n > 0 {
		return append(t.kept[:len(t.kept):len(t.kept)], t.low)
	}
	return t.kept
}

func (s flightSummary) clock(t time.Time) string { return t.In(s.loc).Format("15:04:05") }

func (f *Flight) WriteText(w io.Writer) error {
	s := f.summary()
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
	s.writeFigures(&b)
	if len(s.Events) == 0 {
		b.WriteString("Kernel events: none recorded.\n")
	} else {
		b.WriteString("Kernel events:\n")
		for _, ev := range s.Events {
			fmt.Fprintf(&b, "  %s %s\n", s.clock(ev.At), ev.What)
		}
		if s.EventsLeftOut > 0 {
			fmt.Fprintf(&b, "  and %d more, not listed\n", s.EventsLeftOut)
		}
	}
	if s.Damaged > 0 {
		fmt.Fprintf(&b, "Damaged records skipped: %d (a write cut by the end, or a damaged disk).\n", s.Damaged)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func (s flightSummary) writeFigures(b *strings.Builder) {
	if s.UsableFirst != nil {
		fmt.Fprintf(b, "Usable memory: %s to %s", gibBytes(*s.UsableFirst), gibBytes(*s.UsableLast))
		if s.UsableSlope != nil {
			fmt.Fprintf(b, " (%+.2f GiB a minute)", *s.UsableSlope/(1<<30))
		}
		fmt.Fprintf(b, ", lowest %s at %s.\n", gibBytes(*s.UsableLowest), s.clock(s.UsableLowAt))
	}
	if s.PressureSome != nil {
		fmt.Fprintf(b, "Memory pressure: some %.1f%% of the time", 100**s.PressureSome)
		if s.PressureFull != nil {
			fmt.Fprintf(b, ", full %.1f%%", 100**s.PressureFull)
		}
		b.WriteString(".\n")
	}
	if g := s.Grew; g != nil {
		fmt.Fprintf(b, "Grew most: %s %s, %s to %s.\n", g.Role, g.Kind, gibBytes(g.FirstBytes), gibBytes(g.LastBytes))
	}
	if g := s.GPU; g != nil {
		fmt.Fprintf(b, "GPU at the end: %s.\n", gpuText(*g))
	}
}

func gibBytes(b uint64) string { return gib(float64(b)) }

func gpuText(g flight.GPU) string {
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

func (f *Flight) WriteJSON(w io.Writer) error {
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
		flightSummary
		GPU *gpu `json:"gpu,omitempty"`
	}{flightSummary: f.summary()}
	if g := out.flightSummary.GPU; g != nil {
		out.GPU = &gpu{num(g.TemperatureCelsius), num(g.PowerWatts), num(g.SMClockHertz), g.State}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func (f *Flight) WriteSVG(w io.Writer) error {
	const width, height, left, top, plotW, plotH = 800, 320, 70, 40, 700, 220
	s := f.summary()
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<title>%s</title>`+"\n", esc(s.Verdict))
	fmt.Fprintf(&b, `<text x="%d" y="20" font-size="13">%s</text>`+"\n", left, esc(truncateRunes(s.Verdict, 110)))
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#888"/>`+"\n", left, top, plotW, plotH)
	span := s.To.Sub(s.From).Seconds()
	var hi uint64 = 1
	for _, p := range s.samples {
		hi = max(hi, p.Usable)
	}
	x := func(t time.Time) float64 {
		if span <= 0 {
			return left
		}
		return left + plotW*t.Sub(s.From).Seconds()/span
	}
	y := func(v uint64) float64 { return top + plotH*(1-float64(v)/float64(hi)) }
	if len(s.samples) > 0 {
		b.WriteString(`<polyline fill="none" stroke="#1f77b4" stroke-width="2" points="`)
		for i, p := range s.samples {
			if i > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%.1f,%.1f", x(p.At), y(p.Usable))
		}
		b.WriteString(`"/>` + "\n")
	}
	fmt.Fprintf(&b, `<text x="4" y="%d">%s</text>`+"\n", top+10, gibBytes(hi))
	fmt.Fprintf(&b, `<text x="4" y="%d">0 GiB</text>`+"\n", top+plotH)
	fmt.Fprintf(&b, `<text x="%d" y="%d">usable memory</text>`+"\n", left+4, top+14)
	for _, ev := range s.Events {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#d62728" stroke-dasharray="4 3"><title>%s %s</title></line>`+"\n",
			x(ev.At), top, x(ev.At), top+plotH, s.clock(ev.At), esc(ev.What))
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text><text x="%d" y="%d" text-anchor="end">%s</text>`+"\n",
		left, top+plotH+16, s.clock(s.From), left+plotW, top+plotH+16, s.clock(s.To))
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func truncateRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
