// Package thermallog reads and writes the thermal log of the GB10 guides:
// what `nvidia-smi --query-gpu=timestamp,temperature.gpu,power.draw
// --format=csv,noheader -l N` prints, so that the exporter's log lines up
// with training logs as the guides' thermal-sample.sh log did.
//
// The reader also takes any --query-gpu CSV (Columns), with or without
// header and units, and nvidia-smi dmon's output.
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

// Header is nvidia-smi's header line, written once at the top of a new log.
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
	// EventSeconds holds the clocks_event_reasons_counters.* columns:
	// seconds per reason since the driver loaded.
	EventSeconds map[string]float64
	// Name is nvidia-smi's name column.
	Name string
	// PowerLimit (W) is power.limit or enforced.power.limit.
	PowerLimit *float64
	// Line is the row's line in the log, from 1.
	Line int

	key   string // uuid or pci.bus_id: tells GPUs apart without an index
	local bool   // the timestamp had no offset (while parsing)
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

// Trace is a parsed log. Comments are its lines starting with #, which
// nvidia-smi never writes and the test corpus uses for its expectations.
type Trace struct {
	Rows     []Row
	Comments []string
	// Skipped are the first MaxSkippedKept malformed lines; SkippedTotal
	// counts them all.
	Skipped      []LineError
	SkippedTotal int
	// Format is FormatCSV, FormatHeaderless or FormatDmon.
	Format string
	// Columns are the quantities the log gives, by their --query-gpu
	// names, whatever the log called them.
	Columns []string
	// Repeated counts the rows of a local-time log read at the later of
	// two offsets: the hour a fall-back to standard time repeats.
	Repeated int
	// Relative: the log has no timestamps and its rows were timed from
	// the Unix epoch, for the caller to place (Shift).
	Relative bool
	// Elapsed: the relative times are an elapsed_s column's, seconds
	// since the run's start (the epoch), not the rows' count.
	Elapsed bool
}

// The formats of a log.
const (
	FormatCSV        = "nvidia-smi --query-gpu CSV"
	FormatHeaderless = "headerless CSV (timestamp, temperature.gpu, power.draw)"
	FormatDmon       = "nvidia-smi dmon"
)

// Has reports whether the log has a column giving the named quantity.
func (t Trace) Has(column string) bool {
	for _, c := range t.Columns {
		if c == column {
			return true
		}
	}
	return false
}

// Shift moves every row's time by d.
func (t Trace) Shift(d time.Duration) {
	for i := range t.Rows {
		t.Rows[i].Time = t.Rows[i].Time.Add(d)
	}
}

// LineError is a malformed line, by its number (from 1).
type LineError struct {
	Line int
	Err  error
}

func (e LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }

// MalformedError is what Parse returns when it skipped lines: the first
// MaxSkippedKept of them, and how many there were.
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

// column is what a known column fills in a Row.
type column func(r *Row, field string) error

// Reasons names NVML's clock event reasons as nvidia-smi's query fields
// do (clocks_event_reasons.NAME), with their bits from nvml.h.
var Reasons = map[string]uint64{
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
	// The timestamp is read by the parser itself, in the log's zone.
	"timestamp":       func(*Row, string) error { return nil },
	"index":           parseIndex,
	"temperature.gpu": number("temperature.gpu", "°C", func(r *Row, v float64) { r.Temperature = &v }, "", MinTemperature, MaxTemperature),
	"power.draw":      number("power.draw", "W", func(r *Row, v float64) { r.Power = &v }, "W", 0, MaxPower),
	// Newer drivers name the instantaneous reading apart from the
	// one-second average that power.draw became.
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
	// Timed by the parser itself, from the epoch.
	ElapsedColumn: func(*Row, string) error { return nil },
}

// aliases are the names benchmark harnesses give nvidia-smi's quantities
// (djangodevreng/dgx-spark-benchmarks writes
// elapsed_s,power_w,temp_c,sm_mhz,gpu_util,mem_used_mb).
var aliases = map[string]string{
	"temp_c": "temperature.gpu", "temperature_c": "temperature.gpu", "gpu_temp_c": "temperature.gpu",
	"power_w": "power.draw", "gpu_power_w": "power.draw",
	"sm_mhz": "clocks.sm", "sm_clock_mhz": "clocks.sm",
	"gpu_util": "utilization.gpu", "util_pct": "utilization.gpu", "gpu_util_pct": "utilization.gpu",
}

// ElapsedColumn is a column of seconds since the run's start, in place of
// timestamps (Trace.Relative).
const ElapsedColumn = "elapsed_s"

// Columns lists the column names the reader understands, beside
// clocks_event_reasons.REASON and clocks_event_reasons_counters.REASON
// (and the older clocks_throttle_reasons.*), REASON a key of Reasons.
func Columns() []string {
	names := make([]string, 0, len(columns))
	for n := range columns {
		names = append(names, n)
	}
	return names
}

// lookup is nil for a column the reader skips.
func lookup(name string) column {
	if c, ok := columns[name]; ok {
		return c
	}
	for _, family := range []string{"clocks_event_reasons", "clocks_throttle_reasons"} {
		if reason, ok := strings.CutPrefix(name, family+"_counters."); ok {
			if _, known := Reasons[reason]; known {
				return counter(reason)
			}
		}
		if reason, ok := strings.CutPrefix(name, family+"."); ok {
			if bit, known := Reasons[reason]; known {
				return activeFlag(bit)
			}
		}
	}
	return nil
}

// headerName is a column name as nvidia-smi's header prints it, with its
// unit when --format has no nounits: `power.draw [W]`.
var headerName = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_.]*)(?: \[[^\]]*\])?$`)

// headerNames takes a header line (`timestamp, power.draw [W]`) to plain
// names; ok is false when a field is not a name.
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

// ParseColumns reads --columns: column names as a header gives them.
func ParseColumns(list string) ([]string, error) {
	fields := strings.Split(list, ",")
	names, ok := headerNames(fields)
	if !ok || len(names) == 0 {
		return nil, errors.New("not a comma-separated list of column names like timestamp,temperature.gpu,power.draw")
	}
	known := false
	seen := map[string]bool{}
	for _, n := range names {
		known = known || lookup(n) != nil || n == ElapsedColumn
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

// notReported is how nvidia-smi prints a value it cannot give: [N/A],
// [Not Supported], [Unknown Error], …
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

// number parses a value with an optional unit suffix (`12.34 W`) within
// [lo, hi]; shown is the unit as a person reads it, for the error.
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

// activeFlag reads clocks_event_reasons.REASON: `Active` or `Not Active`,
// one bit of the mask.
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

// counter reads clocks_event_reasons_counters.REASON, in µs, into seconds.
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
