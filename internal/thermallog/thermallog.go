// Package thermallog reads and writes the GB10 guides' nvidia-smi thermal log,
// so that the exporter's log lines up with training logs as the guides' did.
// The reader also takes any --query-gpu CSV and nvidia-smi dmon's output.
package thermallog

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

const Header = "timestamp,temperature.gpu,power.draw"

// timeLayout is nvidia-smi's timestamp (2025/11/24 14:08:55.751), local time.
const timeLayout = "2006/01/02 15:04:05.000"

// Row is one GPU's sample; a nil field is one nvidia-smi printed as [N/A].
type Row struct {
	Time        time.Time
	GPU         *int     // nvidia-smi's index column, where the log has one
	Temperature *float64 // °C
	Power       *float64 // W
	Utilization *float64 // ratio 0–1
	SMClock     *float64 // Hz
	Reasons     *uint64  // NVML clock event reasons mask
	// EventSeconds: seconds per reason since the driver loaded.
	EventSeconds map[string]float64
	Name         string
	PowerLimit   *float64
	Line         int

	key   string // uuid or pci.bus_id: tells GPUs apart without an index
	local bool   // the timestamp had no offset (while parsing)
}

// Format renders as nvidia-smi's --format=csv,noheader: `2025/11/24 14:08:55.751, 38, 12.34 W`.
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

// Trace's Comments are lines starting with #, which nvidia-smi never writes.
type Trace struct {
	Rows         []Row
	Comments     []string
	Skipped      []LineError
	SkippedTotal int
	Format       string
	// Columns are --query-gpu names, whatever the log called them.
	Columns []string
	// Repeated counts rows in the hour a fall-back to standard time repeats.
	Repeated int
	// Relative: rows timed from the Unix epoch, for the caller to place.
	Relative bool
	// Elapsed: the relative times are an elapsed_s column's, not the rows' count.
	Elapsed bool
}

const (
	FormatCSV        = "nvidia-smi --query-gpu CSV"
	formatHeaderless = "headerless CSV (timestamp, temperature.gpu, power.draw)"
	formatDmon       = "nvidia-smi dmon"
)

func (t Trace) Has(column string) bool {
	for _, c := range t.Columns {
		if c == column {
			return true
		}
	}
	return false
}

type LineError struct {
	Line int
	Err  error
}

func (e LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }

type MalformedError struct {
	Lines []LineError
	Total int
}

func (e MalformedError) Error() string {
	if e.Total <= 1 {
		return e.Lines[0].Error()
	}
	return fmt.Sprintf("%v (and %d more malformed lines)", e.Lines[0], e.Total-1)
}

type column func(r *Row, field string) error

// reasons' bits are nvml.h's.
var reasons = map[string]uint64{
	"gpu_idle":                    0x1,
	"applications_clocks_setting": 0x2,
	"sw_power_cap":                0x4,
	"hw_slowdown":                 0x8,
	"sync_boost":                  0x10,
	"sw_thermal_slowdown":         0x20,
	"hw_thermal_slowdown":         0x40,
	"hw_power_brake_slowdown":     0x80,
	"display_clock_setting":       0x100,
}

var columns = map[string]column{
	"timestamp":       func(*Row, string) error { return nil },
	"index":           parseIndex,
	"temperature.gpu": number("temperature.gpu", "°C", func(r *Row, v float64) { r.Temperature = &v }, "", MinTemperature, MaxTemperature),
	"power.draw":      number("power.draw", "W", func(r *Row, v float64) { r.Power = &v }, "W", 0, MaxPower),
	// Newer drivers name the instantaneous reading apart from power.draw's one-second average.
	"power.draw.instant":             number("power.draw.instant", "W", func(r *Row, v float64) { r.Power = &v }, "W", 0, MaxPower),
	"power.draw.average":             number("power.draw.average", "W", func(r *Row, v float64) { r.Power = &v }, "W", 0, MaxPower),
	"power.limit":                    number("power.limit", "W", func(r *Row, v float64) { r.PowerLimit = &v }, "W", 0, MaxPower),
	"enforced.power.limit":           number("enforced.power.limit", "W", func(r *Row, v float64) { r.PowerLimit = &v }, "W", 0, MaxPower),
	"name":                           func(r *Row, v string) error { r.Name = v; return nil },
	"uuid":                           func(r *Row, v string) error { r.key = v; return nil },
	"pci.bus_id":                     func(r *Row, v string) error { r.key = v; return nil },
	"utilization.gpu":                number("utilization.gpu", "%", func(r *Row, v float64) { v /= 100; r.Utilization = &v }, "%", 0, 100),
	"clocks.sm":                      number("clocks.sm", "MHz", func(r *Row, v float64) { v *= 1e6; r.SMClock = &v }, "MHz", 0, 1e6),
	"clocks.current.sm":              number("clocks.current.sm", "MHz", func(r *Row, v float64) { v *= 1e6; r.SMClock = &v }, "MHz", 0, 1e6),
	"clocks_event_reasons.active":    parseReasons,
	"clocks_throttle_reasons.active": parseReasons,
	elapsedColumn:                    func(*Row, string) error { return nil },
}

// aliases are benchmark harnesses' names (djangodevreng/dgx-spark-benchmarks).
var aliases = map[string]string{
	"temp_c": "temperature.gpu", "temperature_c": "temperature.gpu", "gpu_temp_c": "temperature.gpu",
	"power_w": "power.draw", "gpu_power_w": "power.draw",
	"sm_mhz": "clocks.sm", "sm_clock_mhz": "clocks.sm",
	"gpu_util": "utilization.gpu", "util_pct": "utilization.gpu", "gpu_util_pct": "utilization.gpu",
}

const elapsedColumn = "elapsed_s"

func lookup(name string) column {
	if c, ok := columns[name]; ok {
		return c
	}
	for _, family := range []string{"clocks_event_reasons", "clocks_throttle_reasons"} {
		if reason, ok := strings.CutPrefix(name, family+"_counters."); ok {
			if _, known := reasons[reason]; known {
				return counter(reason)
			}
		}
		if reason, ok := strings.CutPrefix(name, family+"."); ok {
			if bit, known := reasons[reason]; known {
				return activeFlag(bit)
			}
		}
	}
	return nil
}

var headerName = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_.]*)(?: \[[^\]]*\])?$`)

// headerNames: ok is false when a field is not a name.
func headerNames(fields []string) ([]string, bool) {
	names := make([]string, len(fields))
	for i, f := range fields {
		m := headerName.FindStringSubmatch(strings.TrimSpace(f))
		if m == nil {
			return nil, false
		}
		names[i] = strings.ToLower(m[1])
		if alias, ok := aliases[names[i]]; ok {
			names[i] = alias
		}
	}
	return names, true
}

func ParseColumns(list string) ([]string, error) {
	fields := strings.Split(list, ",")
	names, ok := headerNames(fields)
	if !ok || len(names) == 0 {
		return nil, errors.New("not a comma-separated list of column names like timestamp,temperature.gpu,power.draw")
	}
	known := false
	seen := map[string]bool{}
	for _, n := range names {
		known = known || lookup(n) != nil || n == elapsedColumn
		if seen[n] {
			return nil, fmt.Errorf("it names %s twice: each column once, in the log's order", n)
		}
		seen[n] = true
	}
	if !known {
		return nil, errors.New("it names no column the report reads (timestamp, temperature.gpu, power.draw, clocks.sm, utilization.gpu, …)")
	}
	return names, nil
}

// notReported: [N/A], [Not Supported], [Unknown Error], …
func notReported(field string) bool {
	return strings.HasPrefix(field, "[") && strings.HasSuffix(field, "]") || field == "-" ||
		strings.EqualFold(field, "N/A") || strings.EqualFold(field, "Not Supported") || strings.EqualFold(field, "Unknown Error")
}

func parseIndex(r *Row, field string) error {
	if notReported(field) {
		return nil
	}
	i, err := strconv.Atoi(field)
	if err != nil || i < 0 || i > 1<<16 {
		return errors.New("not a GPU index")
	}
	r.GPU = &i
	return nil
}

// number: shown is the unit as a person reads it, for the error.
func number(name, shown string, set func(*Row, float64), unit string, lo, hi float64) column {
	return func(r *Row, field string) error {
		if notReported(field) {
			return nil
		}
		v, err := parseNumber(field, unit)
		if err != nil {
			return err
		}
		if v < lo || v > hi {
			return &implausible{name, v, shown, lo, hi}
		}
		set(r, v)
		return nil
	}
}

func parseNumber(field, unit string) (float64, error) {
	if unit != "" {
		field = strings.TrimSpace(strings.TrimSuffix(field, unit))
	}
	v, err := strconv.ParseFloat(field, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, errors.New("not a number")
	}
	return v, nil
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
	if r.Reasons != nil {
		v |= *r.Reasons
	}
	r.Reasons = &v
	return nil
}

func activeFlag(bit uint64) column {
	return func(r *Row, field string) error {
		if notReported(field) {
			return nil
		}
		var set uint64
		switch strings.ToLower(field) {
		case "active":
			set = bit
		case "not active":
		default:
			return errors.New("neither Active nor Not Active")
		}
		if r.Reasons != nil {
			set |= *r.Reasons
		}
		r.Reasons = &set
		return nil
	}
}

// counter: the column is in µs.
func counter(reason string) column {
	return func(r *Row, field string) error {
		if notReported(field) {
			return nil
		}
		v, err := parseNumber(field, "us")
		if err != nil {
			return err
		}
		if v < 0 {
			return fmt.Errorf("%g is negative", v)
		}
		if r.EventSeconds == nil {
			r.EventSeconds = map[string]float64{}
		}
		r.EventSeconds[reason] = v / 1e6
		return nil
	}
}
