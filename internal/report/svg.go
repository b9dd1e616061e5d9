package report

import (
	"fmt"
	"html"
	"io"
	"math"
	"strings"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/judge"
	"github.com/spark-exporter/spark_exporter/internal/safetext"
)

// In SVG user units.
const (
	svgWidth    = 960
	svgLeft     = 64 // room for the y labels
	svgRight    = 24
	svgTop      = 44 // room for the title
	panelHeight = 130
	panelGap    = 26
	svgBottom   = 36 // room for the time labels
)

type panel struct {
	title  string
	unit   string
	value  func(judge.ThermalSample) (float64, bool)
	lo, hi float64
	color  string
	marks  func(b *strings.Builder, y func(float64) float64)
}

func (r Report) WriteSVG(w io.Writer) error {
	var b strings.Builder
	panels := r.panels()
	height := svgTop + len(panels)*(panelHeight+panelGap) - panelGap + svgBottom
	plotW := float64(svgWidth - svgLeft - svgRight)
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="DejaVu Sans, Helvetica, Arial, sans-serif" font-size="11">`+"\n",
		svgWidth, height, svgWidth, height)
	b.WriteString(`<rect width="100%" height="100%" fill="#ffffff"/>` + "\n")
	fmt.Fprintf(&b, `<text x="%d" y="18" font-size="14" font-weight="bold">%s</text>`+"\n", svgLeft, esc(r.title()))
	fmt.Fprintf(&b, `<text x="%d" y="34" fill="#444">%s</text>`+"\n", svgLeft, esc(r.Verdict))

	span := r.End.Sub(r.Start)
	x := func(t time.Time) float64 {
		if span <= 0 {
			return svgLeft
		}
		return svgLeft + plotW*t.Sub(r.Start).Seconds()/span.Seconds()
	}
	for i, p := range panels {
		top := float64(svgTop + i*(panelHeight+panelGap))
		y := func(v float64) float64 {
			v = math.Max(p.lo, math.Min(p.hi, v))
			return top + panelHeight - panelHeight*(v-p.lo)/(p.hi-p.lo)
		}
		fmt.Fprintf(&b, `<g><rect x="%d" y="%.0f" width="%.0f" height="%d" fill="#fafafa" stroke="#ccc"/>`+"\n", svgLeft, top, plotW, panelHeight)
		for _, e := range r.Throttle.Episodes {
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.0f" width="%.1f" height="%d" fill="#e4572e" fill-opacity="0.18"/>`+"\n",
				x(e.Start), top, math.Max(1, x(e.End)-x(e.Start)), panelHeight)
		}
		if p.marks != nil {
			p.marks(&b, y)
		}
		for _, tick := range niceTicks(p.lo, p.hi, 4) {
			fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#999"/><text x="%d" y="%.1f" text-anchor="end" fill="#444">%s</text>`+"\n",
				svgLeft-4, svgLeft, y(tick), y(tick), svgLeft-6, y(tick)+4, trimFloat(tick))
		}
		fmt.Fprintf(&b, `<text x="%d" y="%.0f" font-weight="bold" fill="%s">%s (%s)</text>`+"\n", svgLeft+6, top+14, p.color, p.title, p.unit)
		b.WriteString(r.polyline(p, x, y))
		b.WriteString("</g>\n")
	}
	bottom := float64(svgTop + len(panels)*(panelHeight+panelGap) - panelGap)
	for _, t := range timeTicks(r.Start, r.End) {
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.0f" y2="%.0f" stroke="#999"/><text x="%.1f" y="%.0f" text-anchor="middle" fill="#444">%s</text>`+"\n",
			x(t), x(t), bottom, bottom+4, x(t), bottom+16, t.Format("15:04"))
	}
	if th := r.Throttle; len(th.Episodes) > 0 {
		shaded := ""
		if th.EpisodesLeftOut > 0 {
			shaded = fmt.Sprintf("; %d of %d episodes shaded: the first, the last and the longest", len(th.Episodes), th.count())
		}
		fmt.Fprintf(&b, `<rect x="%d" y="%.0f" width="12" height="10" fill="#e4572e" fill-opacity="0.3"/><text x="%d" y="%.0f" fill="#444">throttled (%s%s)</text>`+"\n",
			svgLeft, bottom+22, svgLeft+16, bottom+31, esc(th.Episodes[0].Evidence), shaded)
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func (r Report) title() string {
	what := "thermal log"
	if r.Source == "prometheus" {
		what = r.Instance
	}
	if r.Samples == 0 {
		return fmt.Sprintf("%s, GPU %d: no samples", what, r.GPU)
	}
	return fmt.Sprintf("%s, GPU %d: %s → %s (%s)", what, r.GPU, r.Start.Format("2006-01-02 15:04"), stamp(r.End, r.Start), duration(r.DurationSeconds))
}

func (r Report) panels() []panel {
	tempHi, powerHi, clockHi := 100.0, 250.0, 3.0
	if t := r.Temperature; t != nil {
		tempHi = math.Max(tempHi, math.Ceil(t.Max/10)*10)
	}
	if p := r.Power; p != nil {
		powerHi = math.Max(powerHi, math.Ceil(p.Max/50)*50)
	}
	if c := r.SMClock; c != nil {
		clockHi = math.Max(0.5, math.Ceil(c.Max/1e9*2)/2)
	}
	nominal := 0.0
	if w := r.PowerRatingWatts; w != nil {
		nominal = *w
	}
	plateau := r.PlateauSeconds != nil
	ps := []panel{
		{title: "temperature", unit: "°C", lo: 20, hi: tempHi, color: "#c0392b",
			value: func(s judge.ThermalSample) (float64, bool) { return s.Temperature, true }},
		{title: "power", unit: "W", lo: 0, hi: powerHi, color: "#1f6fb2",
			value: func(s judge.ThermalSample) (float64, bool) { return s.Power, true },
			marks: func(b *strings.Builder, y func(float64) float64) {
				if plateau {
					fmt.Fprintf(b, `<rect x="%d" y="%.1f" width="%d" height="%.1f" fill="#2e9e5b" fill-opacity="0.14"/>`+"\n",
						svgLeft, y(judge.PlateauHighWatts), svgWidth-svgLeft-svgRight, y(judge.PlateauLowWatts)-y(judge.PlateauHighWatts))
					fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end" fill="#2e7d4f">~100 W plateau (%.0f–%.0f W)</text>`+"\n",
						svgWidth-svgRight-6, y(judge.PlateauHighWatts)-3, judge.PlateauLowWatts, judge.PlateauHighWatts)
				}
				if nominal > 0 {
					fmt.Fprintf(b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#555" stroke-dasharray="6 4"/><text x="%d" y="%.1f" text-anchor="end" fill="#555">%.0f W rating</text>`+"\n",
						svgLeft, svgWidth-svgRight, y(nominal), y(nominal), svgWidth-svgRight-6, y(nominal)-3, nominal)
				}
			}},
	}
	if r.SMClock != nil {
		ps = append(ps, panel{title: "SM clock", unit: "GHz", lo: 0, hi: clockHi, color: "#7d3c98",
			value: func(s judge.ThermalSample) (float64, bool) {
				if s.SMClock == nil {
					return 0, false
				}
				return *s.SMClock / 1e9, true
			}})
	}
	return ps
}

// polyline breaks where the analysis does not bridge a gap.
func (r Report) polyline(p panel, x func(time.Time) float64, y func(float64) float64) string {
	var b strings.Builder
	var pts []string
	flush := func() {
		if len(pts) > 1 {
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.4" points="%s"/>`+"\n", p.color, strings.Join(pts, " "))
		}
		pts = pts[:0]
	}
	var prev time.Time
	col, sum, n := math.NaN(), 0.0, 0
	emit := func() {
		if n > 0 {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", col, y(sum/float64(n))))
		}
		sum, n = 0, 0
	}
	for _, s := range r.samples {
		v, ok := p.value(s)
		gap := !prev.IsZero() && s.Time.Sub(prev) > r.pictureGap
		if !ok || gap {
			emit()
			flush()
			col = math.NaN()
		}
		if ok {
			c := math.Round(x(s.Time))
			if c != col {
				emit()
				col = c
			}
			sum += v
			n++
		}
		prev = s.Time
	}
	emit()
	flush()
	return b.String()
}

func niceTicks(lo, hi float64, n int) []float64 {
	raw := (hi - lo) / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	var out []float64
	for v := math.Ceil(lo/step) * step; v <= hi+1e-9; v += step {
		out = append(out, v)
	}
	return out
}

func timeTicks(start, end time.Time) []time.Time {
	span := end.Sub(start)
	step := time.Minute
	for _, s := range []time.Duration{time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute,
		30 * time.Minute, time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour,
		7 * 24 * time.Hour, 30 * 24 * time.Hour, 365 * 24 * time.Hour, 3650 * 24 * time.Hour, 36500 * 24 * time.Hour} {
		step = s
		if span/s <= 10 {
			break
		}
	}
	var out []time.Time
	for t := start.Truncate(step); !t.After(end); t = t.Add(step) {
		if !t.Before(start) {
			out = append(out, t)
		}
	}
	return out
}

func trimFloat(v float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", v), "0"), ".")
}

// esc also strips control characters: XML 1.0 forbids some even as
// references, others act on whoever reads the file (safetext).
func esc(s string) string { return html.EscapeString(safetext.Strip(s)) }
