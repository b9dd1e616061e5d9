package status

import (
	"fmt"
	"io"
	"strings"

	"github.com/spark-exporter/spark_exporter/internal/safetext"
)

// WriteText writes the model as a short text for a terminal: the
// verdicts in words and the figures behind them, as the page shows them.
func WriteText(w io.Writer, m Model) error {
	var b strings.Builder
	// The model's strings come from a server: stripped of what would act
	// on the terminal, and of newlines that would start a line of their own.
	line := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", safetext.Args(args)...) }
	version := ""
	if m.Exporter.Version != "" {
		version = " (spark_exporter " + m.Exporter.Version + ")"
	}
	line("Spark status as of %s%s", m.GeneratedAt, version)
	line("")
	textPool(line, m.Pool)
	if len(m.GPUs) == 0 {
		line("GPU      none reported: %s", m.NVML.Text)
	}
	for _, g := range m.GPUs {
		textGPU(line, g)
	}
	if wl := m.Workloads; wl != nil {
		line("Jobs     %s", wl.Text)
		for _, x := range wl.List {
			res := "not read"
			if x.ResidentBytes != nil {
				res = gib(*x.ResidentBytes)
			}
			line("           %-10s pid %-7d %-9s %s resident, %s", x.Kind, x.PID, x.Role, res, capText(x.Cap))
		}
	}
	if pl := m.Plans; pl != nil {
		for _, p := range pl.List {
			line("Plan     %s: %s", p.Name, p.Text)
		}
	}
	if f := m.Fabric; f != nil {
		line("Fabric   %s", f.Text)
	}
	if f := m.Flight; f != nil {
		line("Boot     %s", f.Text)
	}
	line("Exporter %s; %s", strings.TrimSuffix(m.NVML.Text, "."), collectorHealth(m.Collectors))
	_, err := io.WriteString(w, safetext.StripText(b.String()))
	return err
}

type textLine = func(format string, args ...any)

func textPool(line textLine, p *Pool) {
	if p == nil {
		line("Pool     not known: the pool collector is off or failed")
		return
	}
	line("Pool     %s", p.Text)
	line("         danger:  usable %s (%s)", gib(p.UsableBytes), p.UsableTier)
	line("         new job: headroom %s now, %s after a flush", gib(p.HeadroomBytes), gib(p.HeadroomAfterFlushBytes))
	cma := "no CMA"
	if p.CMAFreeBytes != nil {
		cma = "free CMA " + gib(*p.CMAFreeBytes)
	}
	line("         total %s, used %s, page cache %s (%s flushable), free %s (%s), reserve %s",
		gib(p.TotalBytes), gib(p.UsedBytes), gib(p.PageCacheBytes), gib(p.FlushableBytes), gib(p.FreeBytes), cma, gib(p.ReserveBytes))
	if p.LargeFreeBytes != nil {
		line("         large blocks: %s free in blocks of 32 MiB or more%s", gib(*p.LargeFreeBytes), compactionText(p))
	}
	if p.OOMLadderStep != "" {
		line("         %s", p.OOMLadderStep)
	}
	for _, n := range p.Notes {
		line("         note: %s", n)
	}
}

func textGPU(line textLine, g GPU) {
	var now []string
	if g.TemperatureCelsius != nil {
		now = append(now, celsius(*g.TemperatureCelsius))
	}
	if g.PowerWatts != nil {
		now = append(now, watts(*g.PowerWatts))
	}
	if g.SMClockHertz != nil {
		now = append(now, mhz(*g.SMClockHertz))
	}
	if g.UtilizationRatio != nil {
		now = append(now, percent(*g.UtilizationRatio)+" busy")
	}
	line("GPU %-4d %s: %s", g.Index, g.Name, strings.Join(now, ", "))
	if t := g.Thermal; t != nil {
		line("         %s", t.Text)
		for _, e := range t.Evidence {
			line("           - %s", e)
		}
	}
}

func collectorHealth(cs []Collector) string {
	var failing []string
	for _, c := range cs {
		if !c.Success {
			failing = append(failing, c.Name)
		}
	}
	if len(failing) > 0 {
		return "failing collectors: " + strings.Join(failing, ", ")
	}
	return "all collectors ok"
}
