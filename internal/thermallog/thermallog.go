// Package thermallog reads and writes the thermal log of the GB10 guides:
// the CSV that `nvidia-smi --query-gpu=timestamp,temperature.gpu,power.draw
// --format=csv,noheader -l N` prints, under the header
// `timestamp,temperature.gpu,power.draw`, so that a log written by the
// exporter lines up with training logs exactly as the
// thermal-sample.sh log did.
//
// The reader takes more columns than the writer writes
// (utilization.gpu, clocks.sm, clocks_event_reasons.active, as nvidia-smi
// names them), so that the same format holds the test traces of the
// throttle analysis, and a capture from a real Spark can join them.
package thermallog

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// Header is nvidia-smi's header line, written once at the top of a new log.
const Header = "timestamp,temperature.gpu,power.draw"

// timeLayout is nvidia-smi's timestamp (2025/11/24 14:08:55.751), in local
// time as nvidia-smi prints it.
const timeLayout = "2006/01/02 15:04:05.000"

// Row is one GPU's sample. A nil field is a value not reported; nvidia-smi
// prints it as [N/A].
type Row struct {
	Time        time.Time
	Temperature *float64 // °C
	Power       *float64 // W
	Utilization *float64 // ratio 0–1
	SMClock     *float64 // Hz
	Reasons     *uint64  // NVML clock event reasons mask
}

// Format renders the row's timestamp, temperature and power as nvidia-smi
// does with --format=csv,noheader: `2025/11/24 14:08:55.751, 38, 12.34 W`.
func Format(r Row) string {
	temp, power := "[N/A]", "[N/A]"
	if r.Temperature != nil {
		temp = strconv.FormatFloat(*r.Temperature, 'f', 0, 64)
	}
	if r.Power != nil {
		power = strconv.FormatFloat(*r.Power, 'f', 2, 64) + " W"
	}
	return r.Time.Local().Format(timeLayout) + ", " + temp + ", " + power
}

// Trace is a parsed log: its rows and its comment lines (lines starting
// with #, without the #), which nvidia-smi never writes and the test
// corpus uses for its expectations.
type Trace struct {
	Rows     []Row
	Comments []string
}

// column is what a known column fills in a Row.
type column func(r *Row, field string) error

var columns = map[string]column{
	"timestamp":                      parseTime,
	"temperature.gpu":                number(func(r *Row, v float64) { r.Temperature = &v }, "", -273, 1000),
	"power.draw":                     number(func(r *Row, v float64) { r.Power = &v }, "W", 0, 1e5),
	"utilization.gpu":                number(func(r *Row, v float64) { v /= 100; r.Utilization = &v }, "%", 0, 100),
	"clocks.sm":                      number(func(r *Row, v float64) { v *= 1e6; r.SMClock = &v }, "MHz", 0, 1e6),
	"clocks.current.sm":              number(func(r *Row, v float64) { v *= 1e6; r.SMClock = &v }, "MHz", 0, 1e6),
	"clocks_event_reasons.active":    parseReasons,
	"clocks_throttle_reasons.active": parseReasons,
}

// Parse reads a log. Without a header line, the columns are the
// three. Columns it does not know are skipped; a malformed row is an error
// naming its line.
func Parse(r io.Reader) (Trace, error) {
	var tr Trace
	names := strings.Split(Header, ",")
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		switch {
		case text == "":
			continue
		case strings.HasPrefix(text, "#"):
			tr.Comments = append(tr.Comments, strings.TrimSpace(text[1:]))
			continue
		}
		fields := strings.Split(text, ",")
		if strings.EqualFold(strings.TrimSpace(fields[0]), "timestamp") {
			names = headerNames(fields)
			continue
		}
		if len(fields) != len(names) {
			return tr, fmt.Errorf("line %d: %d fields, the header has %d", line, len(fields), len(names))
		}
		var row Row
		for i, f := range fields {
			parse, ok := columns[names[i]]
			if !ok {
				continue
			}
			if err := parse(&row, strings.TrimSpace(f)); err != nil {
				return tr, fmt.Errorf("line %d, %s: %w", line, names[i], err)
			}
		}
		if row.Time.IsZero() {
			return tr, fmt.Errorf("line %d: no timestamp", line)
		}
		tr.Rows = append(tr.Rows, row)
	}
	return tr, sc.Err()
}

// headerNames takes nvidia-smi's header (`power.draw [W]`) to plain names.
func headerNames(fields []string) []string {
	names := make([]string, len(fields))
	for i, f := range fields {
		f = strings.TrimSpace(f)
		if j := strings.Index(f, " ["); j >= 0 {
			f = f[:j]
		}
		names[i] = strings.ToLower(f)
	}
	return names
}

// notReported is how nvidia-smi prints a value it cannot give: [N/A],
// [Not Supported], [Unknown Error], …
func notReported(field string) bool {
	return strings.HasPrefix(field, "[") && strings.HasSuffix(field, "]") || field == "N/A"
}

func parseTime(r *Row, field string) error {
	t, err := time.ParseInLocation(timeLayout[:len(timeLayout)-4], field, time.Local)
	if err != nil {
		return fmt.Errorf("not a timestamp like 2025/11/24 14:08:55.751")
	}
	r.Time = t
	return nil
}

// number parses a value with an optional unit suffix (`12.34 W`) within
// [lo, hi] and stores it with set.
func number(set func(*Row, float64), unit string, lo, hi float64) column {
	return func(r *Row, field string) error {
		if notReported(field) {
			return nil
		}
		if unit != "" {
			field = strings.TrimSpace(strings.TrimSuffix(field, unit))
		}
		v, err := strconv.ParseFloat(field, 64)
		if err != nil || math.IsNaN(v) {
			return errors.New("not a number")
		}
		if v < lo || v > hi {
			return fmt.Errorf("%g is out of range [%g, %g]", v, lo, hi)
		}
		set(r, v)
		return nil
	}
}

func parseReasons(r *Row, field string) error {
	if notReported(field) {
		return nil
	}
	hex, ok := strings.CutPrefix(strings.ToLower(field), "0x")
	if !ok {
		return errors.New("not a hexadecimal mask like 0x0000000000000040")
	}
	v, err := strconv.ParseUint(hex, 16, 64)
	if err != nil {
		return errors.New("not a hexadecimal mask like 0x0000000000000040")
	}
	r.Reasons = &v
	return nil
}
