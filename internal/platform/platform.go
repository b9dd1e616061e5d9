// Package platform reads what a DGX Spark (GB10) tells through sysfs beyond
// NVML: the DMI identity, the ACPI thermal zones by their ACPI names, and the
// power rails, energy counters, temperatures and firmware power limits of the
// community spbm hwmon driver (github.com/antheas/spark_hwmon). GB10 is one
// die for CPU and GPU on one 240 W supply; when a run slows with nothing in
// nvidia-smi, these show the cause.
//
// A file that cannot be read or parsed is a Problem of the snapshot, never a
// failure of the whole read: ACPI thermal zones answer EIO or ENODATA when
// their AML method fails, and some attributes only root may read.
package platform

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"unicode"
	"unicode/utf8"

	"github.com/spark-exporter/spark_exporter/internal/hostfs"
	"github.com/spark-exporter/spark_exporter/internal/layout"
	"github.com/spark-exporter/spark_exporter/internal/redact"
	"github.com/spark-exporter/spark_exporter/internal/safetext"
)

// FS is what the platform is read through, names relative to the sysfs mount.
type FS = layout.FS

const (
	dmiDir     = "class/dmi/id"
	thermalDir = "class/thermal"
	hwmonDir   = "class/hwmon"
)

// SPBMName is the hwmon name of the spbm driver.
const SPBMName = "spbm"

// dmiFiles are the only DMI attributes opened: product_serial, product_uuid,
// board_serial and chassis_serial identify one unit and are never read.
var dmiFiles = []struct{ file, label string }{
	{"sys_vendor", "vendor"},
	{"product_name", "product_name"},
	{"board_name", "board_name"},
	{"bios_version", "bios_version"},
}

// Identity is the machine's DMI identity; a field whose file is absent is "".
type Identity struct {
	Vendor, ProductName, BoardName, BIOSVersion string
}

// Temperature is one temperature sensor.
type Temperature struct {
	// Source is "acpi" (Sensor is the ACPI name, TSOC), "thermal_zone"
	// (Sensor is the zone's type) or "spbm" (Sensor is the channel's label).
	Source, Sensor string
	// Zone is N of thermal_zoneN, as node_exporter labels it; "" for spbm.
	Zone    string
	Celsius float64
}

// Reading is one named spbm value in base units (watts, joules, °C).
type Reading struct {
	Name  string
	Value float64
}

// SPBM is what the spbm hwmon driver reports.
type SPBM struct {
	Power  []Reading // watts, by rail label (sys_total, gpu, …, pl1 … syspl2)
	Energy []Reading // joules, by accumulator label (pkg, cpu_e, cpu_p, gpu)
	Limits []Reading // watts: the effective cap (powerN_cap) of pl1, pl2, syspl1, syspl2
	Temps  []Reading // °C, by label (tj_max, cpu_p_clu0, gpu, soc, dla, …)
	// Prochot is whether PROCHOT is asserted; nil when unknown.
	Prochot *bool
	// PLLevel is the firmware's power-limit level (pl_level); nil when unknown.
	PLLevel *uint64
}

// Problem is a file that was there but could not be read or parsed.
type Problem = layout.Problem

// Snapshot is one read of the platform.
type Snapshot struct {
	Identity *Identity     // nil without any DMI attribute
	Zones    []Temperature // thermal zones, by zone index
	SPBM     *SPBM         // nil without an spbm hwmon
	Problems []Problem
	// Stale says a file the Layout named has gone (ENOENT, or ENODEV
	// from a driver unbound under an open file): discover again.
	Stale bool
	// Blocked is the read that passed its deadline (hostfs.ErrBlocked);
	// nothing was read after it, since the next file may block as long.
	Blocked *Problem
}

// Read discovers the layout under fsys and reads it once.
func Read(fsys FS) Snapshot {
	return Discover(fsys).Read(fsys.ReadFile)
}

// Layout is what does not change while the machine runs: the DMI identity,
// the thermal zones and spbm channels, and their names.
type Layout struct {
	identity *Identity
	zones    []zoneFile
	spbm     *spbmFiles
	problems []Problem // found while discovering, reported with every read
	blocked  *Problem  // a discovery read that blocked
	// leftOut counts the entries beyond the cap on value files.
	leftOut int
	first   string
}

type zoneFile struct {
	file string
	t    Temperature
}

// valueFile is one spbm value; lo and hi bound its plausible values.
type valueFile struct {
	file, label string
	perUnit     float64 // hwmon units per base unit (1e6 µW per W)
	driverScale uint64  // what the driver multiplied its 32-bit register by
	lo, hi      float64
}

// Below −60 °C no electronics is rated to run (military grade: −55 °C), above
// 200 °C none survives (GB10's tj_max is 105 °C). Beyond are error codes read
// as values: ACPI zones' −273.15 °C, all-ones registers' 9.2e15 °C.
const (
	minCelsius = -60
	maxCelsius = 200
)

// maxWatts is more than any machine on a wall socket draws (the Spark's
// brick is rated 240 W); a 64-bit all-ones register reads 1.8e13 W.
const maxWatts = 10_000

type spbmFiles struct {
	power, limits, energy, temps []valueFile
	prochot, plLevel             string // "" when absent
}

// Discover reads the parts of the platform that do not change. It never
// fails; what it could not read is reported by every Read of the layout.
func Discover(fsys FS) *Layout { return DiscoverAtMost(fsys, math.MaxInt) }

// DiscoverAtMost is Discover with at most max value files, so that a host
// with thousands of thermal zones costs a scrape no more than max reads: the
// spbm channels first (the Spark's power), then the zones by index.
func DiscoverAtMost(fsys FS, max int) *Layout {
	r := reader{Tree: layout.Tree{FS: fsys}}
	l := &Layout{}
	l.identity = r.identity()
	l.spbm = r.spbm(max)
	l.zones = r.zones(max - l.spbm.count())
	l.problems = r.Problems
	l.blocked = r.Blocked
	l.leftOut, l.first = r.leftOut, r.first
	return l
}

// LeftOut is how many zones and channels the cap left out, and the file of
// the first of them.
func (l *Layout) LeftOut() (n int, first string) { return l.leftOut, l.first }

// Read reads the values of the layout through read, one file after the
// other: after a read that blocks, nothing more is read.
func (l *Layout) Read(read func(name string) ([]byte, error)) Snapshot {
	if l.blocked != nil {
		return Snapshot{Identity: l.identity, Problems: slices.Clone(l.problems), Blocked: l.blocked, Stale: true}
	}
	v := valueReader{read: read}
	s := Snapshot{Identity: l.identity}
	for _, z := range l.zones {
		data, ok := v.file(z.file)
		if !ok {
			continue
		}
		milli, err := ParseInt(data)
		if err != nil {
			v.problem(z.file, err)
			continue
		}
		t := z.t
		t.Celsius = float64(milli) / 1000
		if !v.plausible(z.file, t.Celsius, minCelsius, maxCelsius, "°C") {
			continue
		}
		s.Zones = append(s.Zones, t)
	}
	if f := l.spbm; f != nil {
		p := &SPBM{}
		p.Power = v.readings(f.power)
		p.Limits = v.readings(f.limits)
		p.Energy = v.readings(f.energy)
		p.Temps = v.readings(f.temps)
		if f.prochot != "" {
			if n, ok := v.unsigned(f.prochot); ok {
				asserted := n != 0
				p.Prochot = &asserted
			}
		}
		if f.plLevel != "" {
			if n, ok := v.unsigned(f.plLevel); ok {
				p.PLLevel = &n
			}
		}
		s.SPBM = p
	}
	s.Problems = append(slices.Clone(l.problems), v.problems...)
	s.Stale = v.stale
	s.Blocked = v.blocked
	return s
}

type valueReader struct {
	read     func(name string) ([]byte, error)
	problems []Problem
	stale    bool
	blocked  *Problem
}

func (v *valueReader) problem(file string, err error) {
	v.problems = append(v.problems, Problem{File: file, Err: redact.WithoutPath(err)})
}

func (v *valueReader) file(name string) ([]byte, bool) {
	if v.blocked != nil {
		return nil, false
	}
	data, err := v.read(name)
	switch {
	case errors.Is(err, hostfs.ErrBlocked):
		v.blocked = &Problem{File: name, Err: redact.WithoutPath(err)}
		return nil, false
	case errors.Is(err, fs.ErrNotExist):
		v.stale = true
		return nil, false
	case errors.Is(err, syscall.ENODEV):
		v.stale = true
		v.problem(name, err)
		return nil, false
	case err != nil:
		v.problem(name, err)
		return nil, false
	}
	return data, true
}

func (v *valueReader) unsigned(name string) (uint64, bool) {
	data, ok := v.file(name)
	if !ok {
		return 0, false
	}
	n, err := ParseUint(data)
	if err != nil {
		v.problem(name, err)
		return 0, false
	}
	return n, true
}

// readings divides by perUnit rather than multiplying by its inverse, so that
// 25300000 µW is exactly 25.3 W.
func (v *valueReader) readings(files []valueFile) []Reading {
	var out []Reading
	for _, f := range files {
		n, ok := v.unsigned(f.file)
		if !ok {
			continue
		}
		if n == allOnes*f.driverScale {
			v.problem(f.file, errors.New("all-ones register: the firmware gave no reading"))
			continue
		}
		value := float64(n) / f.perUnit
		if !v.plausible(f.file, value, f.lo, f.hi, "") {
			continue
		}
		out = append(out, Reading{f.label, value})
	}
	return out
}

// plausible notes a value outside [lo, hi] as a problem: a value no sensor
// of its kind reads is an error code, not a reading.
func (v *valueReader) plausible(file string, value, lo, hi float64, unit string) bool {
	if value >= lo && value <= hi {
		return true
	}
	v.problem(file, fmt.Errorf("%g%s is outside the plausible %g%s to %g%s", value, unit, lo, unit, hi, unit))
	return false
}

type reader struct {
	layout.Tree
	leftOut int
	first   string
}

func (r *reader) leaveOut(file string) {
	if r.leftOut == 0 {
		r.first = file
	}
	r.leftOut++
}

func (r *reader) identity() *Identity {
	var id Identity
	fields := []*string{&id.Vendor, &id.ProductName, &id.BoardName, &id.BIOSVersion}
	found := false
	for i, f := range dmiFiles {
		name := path.Join(dmiDir, f.file)
		data, ok := r.File(name)
		if !ok {
			continue
		}
		v, err := ParseLabel(data)
		if err != nil {
			r.Problem(name, err)
			continue
		}
		*fields[i] = v
		found = true
	}
	if !found {
		return nil
	}
	return &id
}

// zoneIndex is N of thermal_zoneN, or "" for another entry (cooling
// devices share the directory).
func zoneIndex(entry string) string {
	n, ok := strings.CutPrefix(entry, "thermal_zone")
	if !ok || n == "" || len(n) > 9 || strings.Trim(n, "0123456789") != "" {
		return ""
	}
	return n
}

func (r *reader) zones(room int) []zoneFile {
	type entry struct {
		index int
		name  string
	}
	var entries []entry
	for _, e := range r.Entries(thermalDir) {
		if n := zoneIndex(e.Name()); n != "" {
			index, _ := strconv.Atoi(n)
			entries = append(entries, entry{index, e.Name()})
		}
	}
	// thermal_zone10 after thermal_zone9, whatever order the listing gave.
	slices.SortFunc(entries, func(a, b entry) int { return a.index - b.index })
	var out []zoneFile
	for _, e := range entries {
		dir := path.Join(thermalDir, e.name)
		if len(out) >= room {
			r.leaveOut(path.Join(dir, "temp"))
			continue
		}
		t, ok := r.zone(dir)
		if !ok {
			continue
		}
		t.Zone = strconv.Itoa(e.index)
		out = append(out, zoneFile{path.Join(dir, "temp"), t})
	}
	return out
}

// zone names one thermal zone: by the ACPI device behind it (device/path,
// "\_TZ_.TSOC") or else by its type.
func (r *reader) zone(dir string) (Temperature, bool) {
	var t Temperature
	acpiFile := path.Join(dir, "device", "path")
	if data, ok := r.File(acpiFile); ok {
		name, err := ParseACPIName(data)
		if err == nil {
			t.Source, t.Sensor = "acpi", name
			return t, true
		}
		r.Problem(acpiFile, err)
	}
	typeFile := path.Join(dir, "type")
	data, ok := r.File(typeFile)
	if !ok {
		return Temperature{}, false
	}
	typ, err := ParseLabel(data)
	if err == nil && typ == "" {
		err = errors.New("empty")
	}
	if err != nil {
		r.Problem(typeFile, err)
		return Temperature{}, false
	}
	t.Source, t.Sensor = "thermal_zone", typ
	return t, true
}

// spbmDir is the hwmon device named spbm, the first in name order if two.
func (r *reader) spbmDir() string {
	var dirs []string
	for _, e := range r.Entries(hwmonDir) {
		if !strings.HasPrefix(e.Name(), "hwmon") {
			continue
		}
		nameFile := path.Join(hwmonDir, e.Name(), "name")
		data, ok := r.File(nameFile)
		if ok && string(bytes.TrimSpace(data)) == SPBMName {
			dirs = append(dirs, path.Join(hwmonDir, e.Name()))
		}
	}
	if len(dirs) == 0 {
		return ""
	}
	slices.Sort(dirs)
	return dirs[0]
}

// A hwmon channel attribute, as the hwmon sysfs ABI names them
// (Documentation/hwmon/sysfs-interface.rst): power3_input, temp1_label.
type channel struct {
	kind  string // power, energy, temp
	index int
}

func parseAttribute(file string) (ch channel, attr string, ok bool) {
	kindIndex, attr, ok := strings.Cut(file, "_")
	if !ok {
		return channel{}, "", false
	}
	for _, kind := range []string{"power", "energy", "temp"} {
		n, found := strings.CutPrefix(kindIndex, kind)
		if !found || n == "" || len(n) > 4 || strings.Trim(n, "0123456789") != "" {
			continue
		}
		index, _ := strconv.Atoi(n)
		return channel{kind, index}, attr, true
	}
	return channel{}, "", false
}

// allOnes is what a 32-bit SPBM register reads when the firmware has not
// filled it (the driver warns "telemetry may be inactive"): no reading.
const allOnes = 0xFFFFFFFF

func (r *reader) spbm(room int) *spbmFiles {
	dir := r.spbmDir()
	if dir == "" {
		return nil
	}
	channels, attrs, files := r.spbmChannels(dir)
	s := &spbmFiles{}
	// PROCHOT and the power-limit level first: one file each, and what
	// tells a throttle.
	for _, f := range []struct {
		name string
		to   *string
	}{{"prochot", &s.prochot}, {"pl_level", &s.plLevel}} {
		if !files[f.name] {
			continue
		}
		if s.count() >= room {
			r.leaveOut(path.Join(dir, f.name))
			continue
		}
		*f.to = path.Join(dir, f.name)
	}
	seen := map[string]bool{} // kind/label, so that no series repeats
	for _, ch := range channels {
		has := attrs[ch]
		if !has["input"] {
			continue
		}
		prefix := path.Join(dir, ch.kind+strconv.Itoa(ch.index))
		need := 1
		if ch.kind == "power" && has["cap"] {
			need = 2
		}
		if s.count()+need > room {
			r.leaveOut(prefix + "_input")
			continue
		}
		label, ok := r.channelLabel(prefix, ch, has["label"])
		if !ok {
			continue
		}
		if seen[ch.kind+"/"+label] {
			r.Problem(prefix+"_label", fmt.Errorf("label %q repeats an earlier %s channel's", label, ch.kind))
			continue
		}
		seen[ch.kind+"/"+label] = true
		s.add(ch.kind, prefix, label, has["cap"])
	}
	return s
}

func (r *reader) spbmChannels(dir string) (channels []channel, attrs map[channel]map[string]bool, files map[string]bool) {
	attrs, files = map[channel]map[string]bool{}, map[string]bool{}
	for _, e := range r.Entries(dir) {
		files[e.Name()] = true
		ch, attr, ok := parseAttribute(e.Name())
		if !ok {
			continue
		}
		if attrs[ch] == nil {
			attrs[ch] = map[string]bool{}
			channels = append(channels, ch)
		}
		attrs[ch][attr] = true
	}
	slices.SortFunc(channels, func(a, b channel) int {
		if c := strings.Compare(a.kind, b.kind); c != 0 {
			return c
		}
		return a.index - b.index
	})
	return channels, attrs, files
}

// channelLabel falls back to the channel's name (power3) without a label
// file; ok is false when the label file is unreadable or bad.
func (r *reader) channelLabel(prefix string, ch channel, hasLabel bool) (label string, ok bool) {
	if !hasLabel {
		return ch.kind + strconv.Itoa(ch.index), true
	}
	data, ok := r.File(prefix + "_label")
	if !ok {
		return "", false
	}
	l, err := ParseLabel(data)
	if err == nil && l == "" {
		err = errors.New("empty")
	}
	if err != nil {
		r.Problem(prefix+"_label", err)
		return "", false
	}
	return l, true
}

// add adds a channel's value files. hwmon units: µW, µJ, m°C; the driver
// scales 32-bit firmware registers in mW, mJ and c°C.
func (s *spbmFiles) add(kind, prefix, label string, hasCap bool) {
	switch kind {
	case "power":
		s.power = append(s.power, valueFile{prefix + "_input", label, 1e6, 1000, 0, maxWatts})
		if hasCap {
			s.limits = append(s.limits, valueFile{prefix + "_cap", label, 1e6, 1000, 0, maxWatts})
		}
	case "energy":
		// At most what the driver's scaled 32-bit counter holds.
		s.energy = append(s.energy, valueFile{prefix + "_input", label, 1e6, 1000, 0, allOnes * 1000 / 1e6})
	case "temp":
		s.temps = append(s.temps, valueFile{prefix + "_input", label, 1e3, 10, minCelsius, maxCelsius})
	}
}

func (s *spbmFiles) count() int {
	if s == nil {
		return 0
	}
	n := len(s.power) + len(s.limits) + len(s.energy) + len(s.temps)
	for _, f := range []string{s.prochot, s.plLevel} {
		if f != "" {
			n++
		}
	}
	return n
}

// MaxValue bounds a value file, newline included: an int64 is at most 20
// characters, so a longer file is not a value.
const MaxValue = 32

func value(data []byte) ([]byte, error) {
	v := bytes.TrimSpace(data)
	switch {
	case len(v) == 0:
		return nil, errors.New("empty")
	case len(data) > MaxValue:
		return nil, fmt.Errorf("%d bytes, not a number", len(data))
	}
	return v, nil
}

// ParseInt parses a signed decimal sysfs attribute ("41700\n").
func ParseInt(data []byte) (int64, error) {
	v, err := value(data)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("not an integer: %q", v)
	}
	return n, nil
}

// ParseUint parses an unsigned decimal sysfs attribute.
func ParseUint(data []byte) (uint64, error) {
	v, err := value(data)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(string(v), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("not an unsigned integer: %q", v)
	}
	return n, nil
}

// maxLabel bounds a label value taken from a file: DMI strings and hwmon
// labels are tens of bytes.
const maxLabel = 128

// ParseLabel turns a one-line text attribute (a DMI string, a hwmon label, a
// zone type) into a label value. More than one line, a control or format
// character (safetext.Unsafe) or more than maxLabel bytes is refused, not cut:
// such a file is not what the attribute is.
func ParseLabel(data []byte) (string, error) {
	s := strings.TrimSpace(strings.ToValidUTF8(string(data), string(utf8.RuneError)))
	if len(s) > maxLabel {
		return "", fmt.Errorf("%d bytes, more than the %d of a label", len(s), maxLabel)
	}
	if i := safetext.Index(s); i >= 0 {
		r, _ := utf8.DecodeRuneInString(s[i:])
		kind := "format"
		if unicode.IsControl(r) {
			kind = "control"
		}
		return "", fmt.Errorf("%s character %U in a one-line attribute", kind, r)
	}
	return s, nil
}

// ParseACPIName takes the ACPI name from a path attribute ("\_TZ_.TSOC" is
// TSOC). A name segment is one to four characters, the first a capital or _,
// the rest capitals, digits or _ (ACPI 6.5, section 20.2.2).
func ParseACPIName(data []byte) (string, error) {
	p := string(bytes.TrimSpace(data))
	if !strings.HasPrefix(p, `\`) {
		return "", fmt.Errorf("not an ACPI path: %q", truncate(p))
	}
	seg := p[strings.LastIndexAny(p, `\.`)+1:]
	if seg == "" || len(seg) > 4 {
		return "", fmt.Errorf("not an ACPI name: %q", truncate(seg))
	}
	for i, c := range seg {
		switch {
		case c >= 'A' && c <= 'Z', c == '_':
		case i > 0 && c >= '0' && c <= '9':
		default:
			return "", fmt.Errorf("not an ACPI name: %q", truncate(seg))
		}
	}
	return seg, nil
}

func truncate(s string) string {
	if len(s) > 32 {
		return s[:32] + "…"
	}
	return s
}
