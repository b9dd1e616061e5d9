package report

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/judge"
	"github.com/spark-exporter/spark_exporter/internal/safetext"
	"github.com/spark-exporter/spark_exporter/internal/units"
)

const (
	verdictNotThrottled  = "not_throttled"
	verdictThrottled     = "throttled"
	verdictSignatureOnly = "signature_only"
	verdictCannotTell    = "cannot_tell"
)

// verdict never reads "not throttled" where the run could not be judged.
func verdict(r Report) (string, string) {
	if r.Samples == 0 {
		return "cannot tell: no usable sample (temperature and power) in the run", verdictCannotTell
	}
	var b strings.Builder
	state := verdictNotThrottled
	if eps := r.Throttle.Episodes; len(eps) > 0 {
		// Without a clock the signature is not measured throttling.
		signatureOnly, signature, clockLost := true, false, false
		for e := range r.Throttle.evidence {
			signatureOnly = signatureOnly && e == "signature_only"
			signature = signature || strings.Contains(e, "signature")
			clockLost = clockLost || strings.Contains(e, "clock_fall")
		}
		what := "throttled"
		state = verdictThrottled
		if signatureOnly {
			what, state = "with the throttle signature", verdictSignatureOnly
		}
		fmt.Fprintf(&b, "%s %s from %s", percent(r.Throttle.ThrottledRatio), what, clock(eps[0].Start, r.Start))
		if n := r.Throttle.count(); n > 1 {
			fmt.Fprintf(&b, " (%d episodes)", n)
		}
		before, during := clockShift(eps)
		if before != nil && during != nil {
			fmt.Fprintf(&b, ", SM clock %s → %s GHz", ghz(*before), ghz(*during))
		}
		switch w := episodesPower(eps); {
		case signature && w != nil:
			fmt.Fprintf(&b, " at a flat %.0f W", *w)
		case clockLost && w != nil:
			fmt.Fprintf(&b, " at the same power (mean %.0f W)", *w)
		default:
			b.WriteString(", the driver reporting thermal slowdown")
		}
		if signatureOnly {
			b.WriteString(": signature only; clocks not logged")
		} else {
			b.WriteString(": thermal, not configuration")
		}
	} else if why := cannotTell(r); why != "" {
		state = verdictCannotTell
		fmt.Fprintf(&b, "cannot tell: %s", why)
		if r.Temperature != nil {
			fmt.Fprintf(&b, "; peak %.0f °C", r.Temperature.Max)
		}
		b.WriteString("; no throttle episode")
	} else {
		busyShare := r.BusySeconds / math.Max(r.DurationSeconds, 1)
		fmt.Fprintf(&b, "not throttled: busy %s of %s", percent(busyShare), duration(r.DurationSeconds))
		if p := r.PlateauSeconds; p != nil && r.BusySeconds > 0 && *p/r.BusySeconds >= 0.5 {
			fmt.Fprintf(&b, ", %s of it at the ~100 W plateau (the platform's cap, not a fault)", percent(*p/r.BusySeconds))
		}
		if r.Temperature != nil {
			fmt.Fprintf(&b, ", peak %.0f °C", r.Temperature.Max)
		}
		if r.PowerRatingWatts == nil {
			b.WriteString(" (power rating unknown: judged by the SM clock alone)")
		}
	}
	if r.GPUAssumed {
		b.WriteString("; assumed GB10")
	}
	if n := r.Backward.Samples; n > 0 {
		fmt.Fprintf(&b, "; %d sample(s) left out, their time stepped back (from line %d)", n, r.Backward.FirstLine)
	}
	if m := r.Memory; m != nil && m.OOMKills != nil && *m.OOMKills > 0 {
		fmt.Fprintf(&b, "; %d OOM kill(s)", *m.OOMKills)
	}
	return b.String(), state
}

func cannotTell(r Report) string {
	switch {
	case !r.windowCovered:
		return fmt.Sprintf("the samples never cover a whole %s window without a gap (the run: %s)", duration(r.cfg.Window.Seconds()), duration(r.DurationSeconds))
	case r.PowerRatingWatts == nil && r.SMClock == nil:
		return "the GPU's power rating is unknown (--gpu.power-limit) and no SM clock was logged: the throttle signature was not judged"
	}
	return ""
}

func clockShift(eps []Episode) (before, during *float64) {
	var durings []float64
	for _, e := range eps {
		if before == nil && e.SMClockBeforeHertz != nil {
			before = e.SMClockBeforeHertz
		}
		if e.SMClockDuringHertz != nil {
			durings = append(durings, *e.SMClockDuringHertz)
		}
	}
	return before, median(durings)
}

func episodesPower(eps []Episode) *float64 {
	var sum, weight float64
	for _, e := range eps {
		if e.PowerMeanWatts != nil {
			w := math.Max(e.DurationSeconds, 1)
			sum += *e.PowerMeanWatts * w
			weight += w
		}
	}
	if weight == 0 {
		return nil
	}
	return ptr(sum / weight)
}

func joinInts(v []int) string {
	parts := make([]string, len(v))
	for i, n := range v {
		parts[i] = fmt.Sprint(n)
	}
	return strings.Join(parts, ", ")
}

func percent(ratio float64) string { return fmt.Sprintf("%.0f %%", 100*ratio) }

func ghz(hz float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", hz/1e9), "0"), ".")
}

func clock(t, start time.Time) string {
	if !sameDay(t, start) {
		return t.Format("Jan 2 15:04")
	}
	return t.Format("15:04")
}

func sameDay(a, b time.Time) bool {
	ya, ma, da := a.Date()
	yb, mb, db := b.Date()
	return ya == yb && ma == mb && da == db
}

func duration(seconds float64) string {
	d := time.Duration(math.Round(seconds)) * time.Second
	switch {
	case d < time.Minute:
		return d.String()
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
}

func (r Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

func (r Report) WriteText(w io.Writer) error {
	var b strings.Builder
	line := func(label, format string, args ...any) {
		// Strings from a Prometheus server reach a terminal.
		fmt.Fprintf(&b, "%-13s %s\n", label, fmt.Sprintf(format, safetext.Args(args)...))
	}
	r.writeSource(line)
	r.writeRun(line)
	r.writeReadings(line)
	r.Throttle.writeText(&b, line)
	if m := r.Memory; m != nil {
		writeMemory(&b, line, m, r.Start)
	}
	r.writeNotes(&b, line)
	line("verdict", "%s", r.Verdict)
	_, err := io.WriteString(w, safetext.StripText(b.String()))
	return err
}

type lineFunc = func(label, format string, args ...any)

func (r Report) writeSource(line lineFunc) {
	source := "thermal log"
	if r.Source == "prometheus" {
		source = "Prometheus, instance " + r.Instance
	}
	if r.Format != "" {
		source += " (" + r.Format + ")"
	}
	line("source", "%s, GPU %d, %d samples every %s", source, r.GPU, r.Samples, duration(r.IntervalSeconds))
	if len(r.GPUs) > 1 {
		line("GPUs", "the log holds GPUs %s; --gpu chooses", joinInts(r.GPUs))
	}
	if r.GPUName != nil && r.GPUFromMachine {
		line("GPU", "%s (this machine's, from NVML: the log names none)", *r.GPUName)
	} else if r.GPUName != nil {
		line("GPU", "%s", *r.GPUName)
	}
	if r.GPUAssumed {
		line("GPU", "assumed GB10 (nothing names the GPU, nothing contradicts one): %.0f W rating, ~100 W plateau; --gpu.name or --gpu.power-limit for another", *r.PowerRatingWatts)
	}
	if r.StepSeconds > r.IntervalSeconds {
		line("judged", "every %s (the rows averaged: a window holds at most %d steps)", duration(r.StepSeconds), maxWindowSamples)
	}
}

func (r Report) writeRun(line lineFunc) {
	line("run", "%s → %s (%s)", r.Start.Format("2006-01-02 15:04:05 -07:00"), stamp(r.End, r.Start), duration(r.DurationSeconds))
	if n := r.Backward.RepeatedHour; n > 0 {
		line("clock", "%d sample(s) in the hour repeated when the clock fell back to standard time, read at the later offset", n)
	}
	if n := r.Backward.Samples; n > 0 {
		line("clock", "%d sample(s) left out: their time was not after the one before (first at line %d)", n, r.Backward.FirstLine)
	}
	if e := r.EnergyWattHours; e != nil {
		how := "integrated from power"
		if r.EnergySource == "energy_counter" {
			how = "from the energy counter"
		}
		line("energy", "%.1f Wh (%s)", *e, how)
	}
	if r.Samples > 0 {
		share := func(s float64) string { return percent(s / math.Max(r.DurationSeconds, 1)) }
		line("busy", "%s (%s; judged by %s)", duration(r.BusySeconds), share(r.BusySeconds), r.BusyBy)
		if p := r.PlateauSeconds; p != nil {
			line("plateau", "%s (%s) busy at %.0f–%.0f W, the ~100 W plateau", duration(*p), share(*p), judge.PlateauLowWatts, judge.PlateauHighWatts)
		}
	}
}

func (r Report) writeReadings(line lineFunc) {
	if t := r.Temperature; t != nil {
		line("temperature", "%.0f–%.0f °C, mean %.0f °C", t.Min, t.Max, t.Mean)
	}
	if p := r.Power; p != nil {
		rating := "rating unknown"
		if w := r.PowerRatingWatts; w != nil {
			rating = fmt.Sprintf("rating %.0f W", *w)
		}
		line("power", "%.0f–%.0f W, mean %.0f W (%s)", p.Min, p.Max, p.Mean, rating)
	}
	if c := r.SMClock; c != nil {
		line("SM clock", "%s–%s GHz", ghz(c.Min), ghz(c.Max))
	}
}

func (th Throttle) writeText(b *strings.Builder, line lineFunc) {
	line("throttled", "%d episode(s), %s (%s)", th.count(), duration(th.ThrottledSeconds), percent(th.ThrottledRatio))
	for _, e := range th.Episodes {
		end := stamp(e.End, e.Start)
		if e.Open {
			end += " (still at the end)"
		}
		fmt.Fprintf(b, "  %s → %s  %s", e.Start.Format("2006-01-02 15:04:05"), end, duration(e.DurationSeconds))
		if e.PeakTemperatureCelsius != nil {
			fmt.Fprintf(b, ", peak %.0f °C", *e.PeakTemperatureCelsius)
		}
		if e.PowerMeanWatts != nil {
			fmt.Fprintf(b, ", mean %.0f W", *e.PowerMeanWatts)
		}
		if e.SMClockBeforeHertz != nil && e.SMClockDuringHertz != nil {
			fmt.Fprintf(b, ", SM clock %s → %s GHz", ghz(*e.SMClockBeforeHertz), ghz(*e.SMClockDuringHertz))
		}
		fmt.Fprintf(b, ", evidence %s", safetext.Strip(e.Evidence))
		if s := e.ThermalSlowdownSeconds; s != nil {
			fmt.Fprintf(b, " (driver thermal slowdown counters +%s)", duration(*s))
		}
		b.WriteByte('\n')
	}
	leftOut(b, th.EpisodesLeftOut, "episode(s)")
}

func (r Report) writeNotes(b *strings.Builder, line lineFunc) {
	for _, a := range r.Alerts {
		gpu := ""
		if a.GPU != "" {
			gpu = " gpu " + a.GPU
		}
		line("alert", "%s (%s%s) %s → %s", a.Name, a.Severity, gpu, stamp(a.Start, r.Start), stamp(a.End, a.Start))
	}
	leftOut(b, r.AlertsLeftOut, "alert stretch(es)")
	if n := r.PointsLeftOut; n != nil && *n > 0 {
		line("left out", "%d point(s) of Prometheus's answers outside the range asked for, or not a number", *n)
	}
	for _, s := range r.SkippedLines {
		line("skipped", "line %d: %s", s.Line, s.Error)
	}
	if more := r.SkippedTotal - len(r.SkippedLines); more > 0 {
		line("skipped", "and %d more malformed line(s)", more)
	}
	for _, a := range r.Assumptions {
		line("not assumed", "%s", a)
	}
}

func writeMemory(b *strings.Builder, line lineFunc, m *Memory, start time.Time) {
	if v := m.LowestHeadroomBytes; v != nil {
		line("headroom", "lowest %s", gib(*v))
	}
	if v := m.LowestHeadroomAfterFlushBytes; v != nil {
		line("after flush", "lowest %s", gib(*v))
	}
	if v := m.PageCachePeakBytes; v != nil {
		line("page cache", "peak %s", gib(*v))
	}
	if v := m.OOMKills; v != nil {
		line("OOM kills", "%d", *v)
	}
	if v := m.StallMinutes; v != nil {
		line("memory stall", "%.1f min fully stalled", *v)
	}
	for _, s := range m.Contention {
		line("contention", "training beside inference %s → %s", stamp(s.Start, start), stamp(s.End, s.Start))
	}
	leftOut(b, m.ContentionLeftOut, "contention stretch(es)")
	for _, p := range m.PlansStoppedFitting {
		line("plan", "%q stopped fitting at %s", p.Plan, clock(p.Start, start))
	}
}

// leftOut says what a list left out of what it lists.
func leftOut(b *strings.Builder, n int, what string) {
	if n > 0 {
		fmt.Fprintf(b, "  and %d more %s not listed (listed: the first, the last and the longest)\n", n, what)
	}
}

func gib(bytes float64) string { return units.FormatGiB(bytes) }

func stamp(t, ref time.Time) string {
	if sameDay(t, ref) {
		return t.Format("15:04:05")
	}
	return t.Format("2006-01-02 15:04:05")
}
