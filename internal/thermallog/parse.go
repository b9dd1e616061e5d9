package thermallog

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/text/encoding/unicode"
	"golang.org/x/text/transform"
)

// Plausible readings: outside them a line is malformed, or, without a
// header, the columns are not the guide's (890 MHz is no temperature). The
// driver shuts down near 100 °C; the largest NVIDIA boards draw ~1.2 kW.
const (
	MinTemperature = -40.0
	MaxTemperature = 150.0
	MaxPower       = 5000.0
	MaxSMClockHz   = 1e12
	// maxHeaderlessPower is tighter, so that a misread column does not pass for watts.
	maxHeaderlessPower = 1500.0
)

const maxLineBytes = 1 << 20

const maxComments = 64

// maxSkippedKept: the rest are only counted, so that bad lines cost no memory per line.
const maxSkippedKept = 10

// A span between them fits in a time.Duration (292 years), and an unset clock's 1970 still reads.
const (
	firstYear = 1950
	lastYear  = 2199
)

func PlausibleTime(t time.Time) error {
	if y := t.UTC().Year(); y < firstYear || y > lastYear {
		return fmt.Errorf("year %d is outside %d–%d", y, firstYear, lastYear)
	}
	return nil
}

// maxRelativeSpan: rows timed from 1970 stay within lastYear once placed at today's date.
const maxRelativeSpan = 100 * 365 * 24 * time.Hour

type Options struct {
	// Location: nvidia-smi prints local time; nil is time.Local.
	Location *time.Location
	// Interval times rows without timestamps from the epoch; zero refuses such a log.
	Interval time.Duration
	Columns  []string
}

type FormatError struct {
	Line int // 0 for the log as a whole
	Msg  string
}

func (e *FormatError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
	}
	return e.Msg
}

func Parse(r io.Reader) (Trace, error) { return ParseOptions(r, Options{}) }

// ParseOptions: a header may come again (logs concatenated). A malformed line
// is skipped, never guessed at: the rows come with a MalformedError.
func ParseOptions(r io.Reader, opt Options) (Trace, error) {
	var rows []Row
	tr, err := ParseEach(r, opt, func(row Row) { rows = append(rows, row) })
	tr.Rows = rows
	return tr, err
}

// ParseEach keeps no row, so that a log of any length costs the memory of one line.
func ParseEach(r io.Reader, opt Options, each func(Row)) (Trace, error) {
	if opt.Location == nil {
		opt.Location = time.Local
	}
	p := &parser{opt: opt, each: each, last: map[int]time.Time{}, keys: map[string]int{}, columns: map[string]bool{}, lastIndex: -1, elapsed: -1}
	if len(opt.Columns) > 0 {
		if err := p.startCSV(0, opt.Columns); err != nil {
			return p.trace(), err
		}
		p.given = true
	}
	// PowerShell's `>` writes UTF-16 with a byte order mark.
	br := bufio.NewReaderSize(transform.NewReader(r, unicode.BOMOverride(transform.Nop)), 64<<10)
	for line := 1; ; line++ {
		text, tooLong, err := readLine(br)
		if err == io.EOF {
			break
		}
		if err != nil {
			return p.trace(), err
		}
		if tooLong {
			p.skip(LineError{line, fmt.Errorf("longer than %d bytes", maxLineBytes)})
			continue
		}
		if line == 1 {
			text = strings.TrimPrefix(text, "\ufeff")
		}
		if err := p.line(line, text); err != nil {
			return p.trace(), err
		}
	}
	tr := p.trace()
	if tr.SkippedTotal > 0 {
		return tr, MalformedError{tr.Skipped, tr.SkippedTotal}
	}
	return tr, nil
}

func (p *parser) skip(e LineError) {
	if len(p.tr.Skipped) < maxSkippedKept {
		p.tr.Skipped = append(p.tr.Skipped, e)
	}
	p.tr.SkippedTotal++
}

func readLine(br *bufio.Reader) (line string, tooLong bool, err error) {
	var buf []byte
	for {
		chunk, more, err := br.ReadLine()
		if err != nil {
			return "", false, err
		}
		if !tooLong {
			if len(buf)+len(chunk) > maxLineBytes {
				tooLong, buf = true, nil
			} else {
				buf = append(buf, chunk...)
			}
		}
		if !more {
			return string(buf), tooLong, nil
		}
	}
}

type parser struct {
	opt  Options
	each func(Row)
	tr   Trace

	names           []string // the CSV's columns, nil before a header
	dmon            []string // dmon's columns while reading dmon output
	data            bool     // a data line was read
	given           bool     // the columns are opt.Columns: header lines are skipped
	relative        bool     // rows timed by opt.Interval, or by an elapsed_s column
	elapsed         int      // the elapsed_s column's index, -1 without one
	last            map[int]time.Time
	keys            map[string]int
	tick, lastIndex int
	columns         map[string]bool
}

func (p *parser) trace() Trace {
	tr := p.tr
	for c := range p.columns {
		tr.Columns = append(tr.Columns, c)
	}
	sort.Strings(tr.Columns)
	tr.Relative = p.relative
	tr.Elapsed = p.relative && p.elapsed >= 0 && p.names != nil
	switch {
	case p.dmon != nil:
		tr.Format = formatDmon
	case p.names != nil:
		tr.Format = FormatCSV
	case p.data:
		tr.Format = formatHeaderless
	}
	return tr
}

// headerless: the guide's thermal-sample.sh and --thermal.csv-file have no header.
var headerless = strings.Split(Header, ",")

func (p *parser) line(n int, text string) error {
	text = strings.TrimSpace(text)
	if text == "" {
		return nil
	}
	if strings.HasPrefix(text, "#") {
		if names, ok := dmonHeader(text); ok {
			return p.startDmon(n, names)
		}
		if len(p.tr.Comments) < maxComments {
			p.tr.Comments = append(p.tr.Comments, strings.TrimSpace(text[1:]))
		}
		return nil
	}
	if p.dmon != nil {
		row, err := p.dmonRow(n, strings.Fields(text))
		return p.keep(n, row, err, false)
	}
	fields := strings.Split(text, ",")
	// A lone word ("Killed") is a malformed line, not a header.
	if names, ok := headerNames(fields); ok && (len(names) > 1 || lookup(names[0]) != nil) {
		if p.given {
			return nil // --columns names the columns
		}
		return p.startCSV(n, names)
	}
	if p.names == nil && !p.data && len(fields) != len(headerless) {
		return &FormatError{n, fmt.Sprintf("no header line, and %d fields: name the %d columns with --columns in the order of --query-gpu (e.g. --columns=timestamp,clocks.sm,temperature.gpu,power.draw,utilization.gpu); without a header or --columns only the guide's three, %s, can be read",
			len(fields), len(fields), strings.Join(headerless, ", "))}
	}
	if p.names == nil && !p.data {
		for _, c := range headerless {
			p.columns[c] = true
		}
	}
	p.data = true
	row, err := p.csvRow(n, fields)
	return p.keep(n, row, err, p.names == nil)
}

// keep refuses a whole headerless log on an implausible value: a misread column, not a bad line.
func (p *parser) keep(n int, row Row, err error, headerless bool) error {
	var bad *implausible
	var unit *wrongUnit
	switch {
	case headerless && errors.As(err, &bad):
		return &FormatError{n, fmt.Sprintf("%v: the log has no header line, and this column is not the guide's %s; name its columns with --columns, or give the log nvidia-smi's header line (--format=csv)", err, bad.column)}
	case headerless && errors.As(err, &unit):
		return &FormatError{n, fmt.Sprintf("%v: the log has no header line, and this column is not the guide's %s; name its columns with --columns, or give the log nvidia-smi's header line (--format=csv)", err, unit.column)}
	}
	var span *spanError
	if errors.As(err, &span) {
		return &FormatError{n, span.Error()}
	}
	if err != nil {
		p.skip(LineError{n, err})
		return nil
	}
	if err := p.place(&row); err != nil {
		p.skip(LineError{n, err})
		return nil
	}
	p.each(row)
	return nil
}

func (p *parser) startCSV(n int, names []string) error {
	known := false
	for _, name := range names {
		known = known || lookup(name) != nil
	}
	if !known {
		return &FormatError{n, fmt.Sprintf("a header naming no column the report reads (found %s; it reads timestamp, temperature.gpu, power.draw, utilization.gpu, clocks.sm, index, name, power.limit, …)",
			strings.Join(names, ", "))}
	}
	hasTime := false
	p.elapsed = -1
	for i, name := range names {
		if c := canonical(name); c != "" {
			p.columns[c] = true
		}
		hasTime = hasTime || name == "timestamp"
		if name == elapsedColumn && p.elapsed < 0 && !hasTime {
			p.elapsed = i
		}
	}
	if hasTime {
		p.elapsed = -1
	}
	why := "the header names no timestamp column"
	if n == 0 {
		why = "--columns names no timestamp column"
	}
	if p.elapsed >= 0 {
		// Timed from the epoch, for the caller to place (--from).
		p.relative = true
		p.columns["timestamp"] = true
	} else if err := p.timing(n, hasTime, why); err != nil {
		return err
	}
	p.names, p.dmon = names, nil
	return nil
}

func (p *parser) timing(n int, hasTime bool, why string) error {
	if hasTime {
		p.relative = false
		return nil
	}
	if p.opt.Interval <= 0 {
		return &FormatError{n, why + ": give the interval the log was written at (--log.interval)"}
	}
	p.relative = true
	p.columns["timestamp"] = true
	return nil
}

func (p *parser) csvRow(n int, fields []string) (Row, error) {
	names := p.names
	if names == nil {
		names = headerless
	}
	row := Row{Line: n}
	if len(fields) != len(names) {
		return row, fmt.Errorf("%d fields, the header has %d", len(fields), len(names))
	}
	if p.names == nil {
		if err := headerlessUnits(fields); err != nil {
			return row, err
		}
	}
	local := false
	for i, f := range fields {
		f = strings.TrimSpace(f)
		if p.names != nil && i == p.elapsed {
			v, err := parseNumber(f, "s")
			if err != nil || v < 0 {
				return row, fmt.Errorf("%s: not a number of seconds", elapsedColumn)
			}
			if v > maxRelativeSpan.Seconds() {
				return row, &spanError{fmt.Sprintf("%s %g: the log would span more than %d years", elapsedColumn, v, int(maxRelativeSpan.Hours()/24/365))}
			}
			row.Time = time.Unix(0, 0).UTC().Add(time.Duration(v * float64(time.Second)))
			continue
		}
		if names[i] == "timestamp" {
			if p.relative {
				continue
			}
			t, isLocal, err := parseTimestamp(f, p.opt.Location)
			if err != nil {
				return row, fmt.Errorf("timestamp: %w", err)
			}
			row.Time, local = t, isLocal
			continue
		}
		parse := lookup(names[i])
		if parse == nil {
			continue
		}
		if err := parse(&row, f); err != nil {
			return row, fmt.Errorf("%s: %w", names[i], err)
		}
	}
	if p.names == nil {
		if err := plausibleHeaderless(row); err != nil {
			return row, err
		}
	}
	return row, p.timeRow(&row, local)
}

type implausible struct {
	column string
	value  float64
	unit   string
	lo, hi float64
}

func (e *implausible) Error() string {
	return fmt.Sprintf("%g %s is out of range [%g, %g]", e.value, e.unit, e.lo, e.hi)
}

// wrongUnit: a clock in MHz where the guide's log has its temperature.
type wrongUnit struct{ column, field string }

func (e *wrongUnit) Error() string {
	return fmt.Sprintf("%s reads %q, not a value in its unit", e.column, e.field)
}

// headerlessUnits: without nounits, temperature.gpu has none, power.draw W.
func headerlessUnits(fields []string) error {
	// Units that may still be the column's (a malformed line at worst).
	own := []map[string]bool{nil, {"C": true, "°C": true}, {"W": true, "mW": true}}
	for i := 1; i < len(headerless); i++ {
		f := strings.TrimSpace(fields[i])
		sp := strings.LastIndexByte(f, ' ')
		if notReported(f) || sp < 0 || own[i][f[sp+1:]] {
			continue
		}
		if _, err := strconv.ParseFloat(f[:sp], 64); err == nil {
			// A number with another unit: another column.
			return &wrongUnit{headerless[i], f}
		}
	}
	return nil
}

func plausibleHeaderless(r Row) error {
	if r.Power != nil && *r.Power > maxHeaderlessPower {
		return fmt.Errorf("power.draw: %w", &implausible{"power.draw", *r.Power, "W", 0, maxHeaderlessPower})
	}
	return nil
}

func (p *parser) timeRow(r *Row, local bool) error {
	if p.relative && p.elapsed >= 0 && p.names != nil && p.dmon == nil {
		return nil // timed by its elapsed_s column
	}
	if p.relative {
		if time.Duration(p.tick) >= maxRelativeSpan/p.opt.Interval {
			return &spanError{fmt.Sprintf("at --log.interval=%v the log's rows would span more than %d years", p.opt.Interval, int(maxRelativeSpan.Hours()/24/365))}
		}
		index := -1
		if r.GPU != nil {
			index = *r.GPU
		}
		if p.tick == 0 || index <= p.lastIndex || index < 0 {
			p.tick++
		}
		p.lastIndex = index
		r.Time = time.Unix(0, 0).UTC().Add(time.Duration(p.tick-1) * p.opt.Interval)
		return nil
	}
	if r.Time.IsZero() {
		return errors.New("no timestamp")
	}
	if err := PlausibleTime(r.Time); err != nil {
		return fmt.Errorf("timestamp: %w", err)
	}
	r.local = local
	return nil
}

type spanError struct{ msg string }

func (e *spanError) Error() string { return e.msg }

// place moves a local time into a fall-back's repeated hour where it would otherwise step back.
func (p *parser) place(r *Row) error {
	if r.GPU == nil && r.key != "" {
		i, ok := p.keys[r.key]
		if !ok {
			if len(p.keys) >= MaxGPUs {
				return fmt.Errorf("more than %d GPUs (uuid or pci.bus_id) in the log", MaxGPUs)
			}
			i = len(p.keys)
			p.keys[r.key] = i
		}
		r.GPU = &i
	}
	gpu := -1
	if r.GPU != nil {
		gpu = *r.GPU
	}
	prev, seen := p.last[gpu]
	if r.local && seen && r.Time.Before(prev) {
		if later, ok := laterOccurrence(r.Time, p.opt.Location); ok && later.After(prev) {
			r.Time = later
			p.tr.Repeated++
		}
	}
	if !seen && len(p.last) >= MaxGPUs+1 {
		return fmt.Errorf("more than %d GPUs in the log", MaxGPUs)
	}
	p.last[gpu] = r.Time
	r.local = false
	return nil
}

// MaxGPUs: a DGX holds 8, a Spark 1.
const MaxGPUs = 64

func laterOccurrence(t time.Time, loc *time.Location) (time.Time, bool) {
	const wall = "2006-01-02 15:04:05.999999999"
	clock := t.In(loc).Format(wall)
	for _, d := range []time.Duration{30 * time.Minute, time.Hour, 2 * time.Hour} {
		if c := t.Add(d); c.In(loc).Format(wall) == clock {
			return c.In(loc), true
		}
	}
	return t, false
}

func earliestOccurrence(t time.Time, loc *time.Location) time.Time {
	_, off := t.Zone()
	if _, before := t.Add(-2 * time.Hour).Zone(); before == off {
		return t // no change of offset near t
	}
	const wall = "2006-01-02 15:04:05.999999999"
	clock := t.Format(wall)
	for _, d := range []time.Duration{2 * time.Hour, time.Hour, 30 * time.Minute} {
		if c := t.Add(-d).In(loc); c.Format(wall) == clock {
			return c
		}
	}
	return t
}

// Timestamps with an offset, then without one (read in the log's zone).
var (
	offsetLayouts = []string{
		"2006-01-02T15:04:05Z07:00", "2006-01-02 15:04:05Z07:00",
		"2006-01-02T15:04:05Z0700", "2006-01-02 15:04:05Z0700",
		"2006-01-02 15:04:05 Z07:00", "2006-01-02 15:04:05 Z0700",
		"2006/01/02 15:04:05Z07:00", "2006/01/02 15:04:05 Z07:00",
		"2006-01-02T15:04:05Z07", "2006-01-02 15:04:05Z07",
		// ISO 8601's basic format.
		"20060102T150405Z0700", "20060102T150405Z07:00", "20060102T150405Z07",
	}
	localLayouts = []string{
		"2006/01/02 15:04:05", // nvidia-smi
		"2006-01-02T15:04:05", "2006-01-02 15:04:05", "20060102T150405",
	}
)

// parseTimestamp takes nvidia-smi's, RFC 3339, ISO 8601 extended or basic, or
// Unix seconds (milliseconds from 1e11 on). local says there was no offset.
func parseTimestamp(field string, loc *time.Location) (t time.Time, local bool, err error) {
	// RFC 3339 allows a lower-case t and z.
	field = strings.Map(func(r rune) rune {
		switch r {
		case 't':
			return 'T'
		case 'z':
			return 'Z'
		}
		return r
	}, field)
	if isDecimal(field) {
		v, err := strconv.ParseFloat(field, 64)
		if err == nil && v < 1e14 {
			if v >= 1e11 {
				v /= 1000
			}
			sec := int64(v)
			return time.Unix(sec, int64((v-float64(sec))*1e9)).Round(time.Microsecond).In(loc), false, nil
		}
	}
	if len(field) > 4 && field[4] == '/' {
		// nvidia-smi's own, the common case: tried first.
		if t, err := time.ParseInLocation(localLayouts[0], field, loc); err == nil {
			return earliestOccurrence(t, loc), true, nil
		}
	}
	for _, layout := range offsetLayouts {
		if t, err := time.Parse(layout, field); err == nil {
			return t, false, nil
		}
	}
	for _, layout := range localLayouts {
		if t, err := time.ParseInLocation(layout, field, loc); err == nil {
			// The earlier of a fall-back's two instants; place moves a
			// row to the later where time would otherwise step back.
			return earliestOccurrence(t, loc), true, nil
		}
	}
	return time.Time{}, false, errors.New("not a timestamp like 2025/11/24 14:08:55.751, 2025-11-24T14:08:55+01:00 or Unix seconds")
}

func isDecimal(s string) bool {
	if s == "" {
		return false
	}
	dot := false
	for i, c := range s {
		switch {
		case c >= '0' && c <= '9':
		case c == '.' && !dot && i > 0:
			dot = true
		default:
			return false
		}
	}
	return true
}

func canonical(name string) string {
	switch {
	case lookup(name) == nil:
		return ""
	case strings.HasPrefix(name, "power.draw"):
		return "power.draw"
	case name == "clocks.current.sm":
		return "clocks.sm"
	case name == "enforced.power.limit":
		return "power.limit"
	case name == "uuid" || name == "pci.bus_id":
		return "index"
	case name == elapsedColumn:
		return "timestamp"
	case strings.HasPrefix(name, "clocks_event_reasons") || strings.HasPrefix(name, "clocks_throttle_reasons"):
		return "clocks_event_reasons"
	}
	return name
}
