package status

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// The pool bar and the thermal charts are drawn here only, for the page's first render and the View.

// Chart sizes, in SVG user units.
const (
	chartWidth  = 300
	chartHeight = 80
	barTotal    = 1000
)

type chart struct {
	ID, Title, Desc string
	Points          string
	Lo, Hi          string // the scale's ends, in words
	Lines           []refLine
}

type refLine struct {
	Y     string
	Label string
}

func chartScale(kind string, g GPU) (lo, hi float64) {
	w := g.Thermal.Window
	switch kind {
	case "temperature":
		lo = math.Min(20, math.Floor(w.Temperature.Min/10)*10)
		hi = math.Max(100, math.Ceil(w.Temperature.Max/10)*10)
	case "power":
		hi = math.Ceil(math.Max(w.NominalWatts, w.Power.Max)*1.1/10) * 10
	case "clock":
		top := 0.0
		if w.SMClock != nil {
			top = w.SMClock.Max
		}
		if g.SMClockMaxHertz != nil {
			top = math.Max(top, *g.SMClockMaxHertz)
		}
		hi = math.Max(100, math.Ceil(top/1e8)*100) * 1e6
	}
	return lo, hi
}

func newChart(kind string, g GPU) chart {
	w := g.Thermal.Window
	lo, hi := chartScale(kind, g)
	y := func(v float64) float64 {
		return math.Max(0, math.Min(chartHeight, chartHeight-(v-lo)/(hi-lo)*chartHeight))
	}
	var pts []byte
	for _, p := range w.Samples {
		var v float64
		switch kind {
		case "temperature":
			v = p.TemperatureCelsius
		case "power":
			v = p.PowerWatts
		case "clock":
			if p.SMClockHertz == nil {
				continue
			}
			v = *p.SMClockHertz
		}
		if len(pts) > 0 {
			pts = append(pts, ' ')
		}
		pts = appendNum(pts, chartWidth*(1-p.SecondsAgo/w.Seconds))
		pts = append(pts, ',')
		pts = appendNum(pts, y(v))
	}
	c := chart{ID: fmt.Sprintf("gpu%d-%s", g.Index, kind), Points: string(pts)}
	c.Desc = chartDesc(kind, g)
	switch kind {
	case "temperature":
		c.Title, c.Lo, c.Hi = "Temperature", celsius(lo), celsius(hi)
	case "power":
		c.Title, c.Lo, c.Hi = "Power", watts(lo), watts(hi)
		c.Lines = []refLine{
			{num(y(w.PlateauWatts)), fmt.Sprintf("~%.0f W plateau", w.PlateauWatts)},
			{num(y(w.NominalWatts)), fmt.Sprintf("%.0f W rating", w.NominalWatts)},
		}
	case "clock":
		c.Title, c.Lo, c.Hi = "SM clock", mhz(lo), mhz(hi)
	}
	return c
}

func chartDesc(kind string, g GPU) string {
	w := g.Thermal.Window
	span := duration(secondsDuration(w.Seconds))
	if len(w.Samples) == 0 {
		return "No sample in the last " + span + "."
	}
	switch kind {
	case "temperature":
		r := w.Temperature
		return fmt.Sprintf("Temperature over the last %s: %s to %s, now %s.", span, celsius(r.Min), celsius(r.Max), celsius(r.Latest))
	case "power":
		r := w.Power
		return fmt.Sprintf("Power over the last %s: %s to %s, now %s; the ~%.0f W plateau and the %.0f W rating are marked.",
			span, watts(r.Min), watts(r.Max), watts(r.Latest), w.PlateauWatts, w.NominalWatts)
	}
	if r := w.SMClock; r != nil {
		return fmt.Sprintf("SM clock over the last %s: %s to %s, now %s.", span, mhz(r.Min), mhz(r.Max), mhz(r.Latest))
	}
	return "NVML reports no SM clock."
}

// num is a coordinate to a tenth of a unit: finer than a pixel.
func num(x float64) string { return string(appendNum(nil, x)) }

// appendNum writes tenths as integers: integer formatting is far cheaper.
func appendNum(b []byte, x float64) []byte {
	tenths := int64(math.Round(x * 10))
	if tenths < 0 {
		b = append(b, '-')
		tenths = -tenths
	}
	b = strconv.AppendInt(b, tenths/10, 10)
	if d := tenths % 10; d != 0 {
		b = append(b, '.', byte('0'+d))
	}
	return b
}

func barWidth(p *Pool, i int) string {
	if p.TotalBytes <= 0 {
		return "0"
	}
	return num(float64(max(0, p.Bar[i].Bytes)) / float64(p.TotalBytes) * barTotal)
}

func barX(p *Pool, i int) string {
	var before int64
	for _, s := range p.Bar[:i] {
		before += max(0, s.Bytes)
	}
	if p.TotalBytes <= 0 {
		return "0"
	}
	return num(float64(before) / float64(p.TotalBytes) * barTotal)
}

// shape names what the page's structure depends on: which sections, GPUs,
// workloads, plans and collectors there are (View.Shape).
func shape(m Model) string {
	var parts []string
	if m.Pool != nil {
		parts = append(parts, "P")
	} else {
		parts = append(parts, "-")
	}
	var gs []string
	for _, g := range m.GPUs {
		s := "G" + strconv.Itoa(g.Index)
		if g.Thermal != nil {
			s += "t"
			if g.Thermal.Window.SMClock != nil {
				s += "c"
			}
		}
		gs = append(gs, s)
	}
	parts = append(parts, strings.Join(gs, ","))
	if m.Workloads != nil {
		var ws []string
		for _, w := range m.Workloads.List {
			c := "u"
			if w.Cap != nil {
				c = "c"
			}
			ws = append(ws, strconv.Itoa(w.PID)+":"+w.Role+":"+c)
		}
		parts = append(parts, "W"+strings.Join(ws, ","))
	} else {
		parts = append(parts, "-")
	}
	if m.Plans != nil {
		var ps []string
		for _, p := range m.Plans.List {
			ps = append(ps, p.Name)
		}
		parts = append(parts, "L"+strings.Join(ps, ","))
	} else {
		parts = append(parts, "-")
	}
	if m.Fabric != nil {
		parts = append(parts, "F")
	} else {
		parts = append(parts, "-")
	}
	var cs []string
	for _, c := range m.Collectors {
		cs = append(cs, c.Name)
	}
	parts = append(parts, "C"+strings.Join(cs, ","))
	return strings.Join(parts, "|")
}
