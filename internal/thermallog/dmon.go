package thermallog

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// nvidia-smi dmon repeats its # header every so many lines. Date and Time come
// with -o DT only, in local time; without them rows are timed by Options.Interval
// (dmon's -d, 1 s by default). pclk is the SM clock.
var dmonColumns = map[string]column{
	"gpu":   parseIndex,
	"pwr":   number("pwr", "W", func(r *Row, v float64) { r.Power = &v }, "", 0, MaxPower),
	"gtemp": number("gtemp", "°C", func(r *Row, v float64) { r.Temperature = &v }, "", MinTemperature, MaxTemperature),
	"temp":  number("temp", "°C", func(r *Row, v float64) { r.Temperature = &v }, "", MinTemperature, MaxTemperature),
	"sm":    number("sm", "%", func(r *Row, v float64) { v /= 100; r.Utilization = &v }, "", 0, 100),
	"pclk":  number("pclk", "MHz", func(r *Row, v float64) { v *= 1e6; r.SMClock = &v }, "", 0, 1e6),
}

var dmonNames = map[string]string{
	"gpu": "index", "pwr": "power.draw", "gtemp": "temperature.gpu", "temp": "temperature.gpu",
	"sm": "utilization.gpu", "pclk": "clocks.sm",
}

// dmonHeader's ok is false for a comment that is not dmon's header.
func dmonHeader(text string) ([]string, bool) {
	names := strings.Fields(strings.ToLower(strings.TrimPrefix(text, "#")))
	gpu, known := false, false
	for _, n := range names {
		gpu = gpu || n == "gpu"
		known = known || (n != "gpu" && dmonColumns[n] != nil)
	}
	return names, gpu && known
}

func (p *parser) startDmon(n int, names []string) error {
	has := map[string]bool{}
	for _, name := range names {
		has[name] = true
		if c, ok := dmonNames[name]; ok {
			p.columns[c] = true
		}
	}
	why := "nvidia-smi dmon without -o DT prints no timestamps"
	if has["time"] && !has["date"] {
		why = "nvidia-smi dmon -o T prints the time without the date"
	}
	if err := p.timing(n, has["date"] && has["time"], why+" (log with dmon -o DT)"); err != nil {
		return err
	}
	if !p.relative {
		p.columns["timestamp"] = true
	}
	p.dmon, p.names = names, nil
	return nil
}

func (p *parser) dmonRow(n int, fields []string) (Row, error) {
	row := Row{Line: n}
	if len(fields) != len(p.dmon) {
		return row, fmt.Errorf("%d fields, dmon's header has %d", len(fields), len(p.dmon))
	}
	var date, clock string
	for i, f := range fields {
		switch name := p.dmon[i]; name {
		case "date":
			date = f
		case "time":
			clock = f
		default:
			if parse := dmonColumns[name]; parse != nil {
				if err := parse(&row, f); err != nil {
					return row, fmt.Errorf("%s: %w", name, err)
				}
			}
		}
	}
	local := false
	if !p.relative {
		t, err := time.ParseInLocation("20060102 15:04:05", date+" "+clock, p.opt.Location)
		if err != nil {
			return row, errors.New("date and time: not like 20240212 14:31:06")
		}
		row.Time, local = t, true
	}
	return row, p.timeRow(&row, local)
}
