// Package platform reads what a Spark tells through sysfs beyond NVML: the
// DMI identity, the ACPI thermal zones, and the community spbm hwmon driver
// (github.com/antheas/spark_hwmon).
//
// A file that cannot be read is a Problem, never a failed read: ACPI zones
// answer EIO or ENODATA when their AML method fails.
package platform

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
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

// FS is the sysfs mount.
type FS = layout.FS

const (
	dmiDir     = "class/dmi/id"
	thermalDir = "class/thermal"
	hwmonDir   = "class/hwmon"
)

const spbmName = "spbm"

// dmiFiles are the only DMI attributes opened: the serials and UUID identify
// one unit and are never read.
var dmiFiles = []struct{ file, label string }{
	{"sys_vendor", "vendor"},
	{"product_name", "product_name"},
	{"board_name", "board_name"},
	{"bios_version", "bios_version"},
}

// Identity is the machine's DMI identity.
type Identity struct {
	Vendor, ProductName, BoardName, BIOSVersion string
}

// Temperature is one temperature sensor.
type Temperature struct {
	Source, Sensor string // "acpi" and TSOC, or "thermal_zone" and the zone's type
	Zone           string // N of thermal_zoneN, as node_exporter labels it
	Celsius        float64
}

// Reading is one spbm value in watts, joules or °C.
type Reading struct {
	Name  string
	Value float64
}

// SPBM is what the spbm hwmon driver reports.
type SPBM struct {
	Power   []Reading // watts, by rail label (sys_total, gpu, …, pl1 … syspl2)
	Energy  []Reading // joules, by accumulator label (pkg, cpu_e, cpu_p, gpu)
	Limits  []Reading // watts: the effective cap (powerN_cap) of pl1, pl2, syspl1, syspl2
	Temps   []Reading // °C, by label (tj_max, cpu_p_clu0, gpu, soc, dla, …)
	Prochot *bool
	PLLevel *uint64 // the firmware's pl_level
}

// Snapshot is one read of the platform.
type Snapshot struct {
	Identity *Identity     // nil without any DMI attribute
	Zones    []Temperature // thermal zones, by zone index
	SPBM     *SPBM         // nil without an spbm hwmon
	Problems []layout.Problem
	// Stale: a file has gone (ENOENT, or ENODEV from a driver unbound under
	// an open file); discover again.
	Stale   bool
	Blocked *layout.Problem // nothing was read after it: the next may block as long
}

// Layout is what does not change while the machine runs.
type Layout struct {
	identity *Identity
	zones    []zoneFile
	spbm     *spbmFiles
	problems []layout.Problem // reported with every read
	blocked  *layout.Problem
	leftOut  int // beyond the cap on value files
	first    string
}

type zoneFile struct {
	file string
	t    Temperature
}

type valueFile struct {
	file, label string
	perUnit     float64 // hwmon units per base unit (1e6 µW per W)
	driverScale uint64  // what the driver multiplied its 32-bit register by
	lo, hi      float64
}

// No electronics runs below −55 °C (military grade) or survives 200 °C
// (GB10's tj_max is 105 °C); beyond are error codes: ACPI's −273.15 °C.
const (
	minCelsius = -60
	maxCelsius = 200
)

// maxWatts is more than a wall socket gives (the Spark's brick: 240 W).
const maxWatts = 10_000

type spbmFiles struct {
	power, limits, energy, temps []valueFile
	prochot, plLevel             string
}

// DiscoverAtMost names at most max value files, so that a host with
// thousands of thermal zones costs a scrape no more: the spbm channels
// first, then the zones by index. It never fails; every Read reports what
// it could not read.
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

func (l *Layout) LeftOut() (n int, first string) { return l.leftOut, l.first }

// Read stops at a read that blocks.
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
		milli, err := parseInt(data)
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
	problems []layout.Problem
	stale    bool
	blocked  *layout.Problem
}

func (v *valueReader) problem(file string, err error) {
	v.problems = append(v.problems, layout.Problem{File: file, Err: redact.WithoutPath(err)})
}

func (v *valueReader) file(name string) ([]byte, bool) {
	if v.blocked != nil {
		return nil, false
	}
	data, err := v.read(name)
	switch {
	case errors.Is(err, hostfs.ErrBlocked):
		v.blocked = &layout.Problem{File: name, Err: redact.WithoutPath(err)}
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
	n, err := parseUint(data)
	if err != nil {
		v.problem(name, err)
		return 0, false
	}
	return n, true
}

// readings divides by perUnit, so that 25300000 µW is exactly 25.3 W.
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

// plausible: a value no sensor of its kind reads is an error code.
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
		v, err := parseLabel(data)
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

// zoneIndex is "" for another entry: cooling devices share the directory.
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

// zone names a zone by its ACPI device (device/path, "\_TZ_.TSOC"), else its type.
func (r *reader) zone(dir string) (Temperature, bool) {
	var t Temperature
	acpiFile := path.Join(dir, "device", "path")
	if data, ok := r.File(acpiFile); ok {
		name, err := parseACPIName(data)
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
	typ, err := parseLabel(data)
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

func (r *reader) spbmDir() string {
	var dirs []string
	for _, e := range r.Entries(hwmonDir) {
		if !strings.HasPrefix(e.Name(), "hwmon") {
			continue
		}
		nameFile := path.Join(hwmonDir, e.Name(), "name")
		data, ok := r.File(nameFile)
		if ok && string(bytes.TrimSpace(data)) == spbmName {
			dirs = append(dirs, path.Join(hwmonDir, e.Name()))
		}
	}
	if len(dirs) == 0 {
		return ""
	}
	slices.Sort(dirs)
	return dirs[0]
}

// channel is of Documentation/hwmon/sysfs-interface.rst: power3_input.
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

// allOnes is a 32-bit register the firmware has not filled (the driver
// warns "telemetry may be inactive").
const allOnes = 0xFFFFFFFF

func (r *reader) spbm(room int) *spbmFiles {
	dir := r.spbmDir()
	if dir == "" {
		return nil
	}
	channels, attrs, files := r.spbmChannels(dir)
	s := &spbmFiles{}
	// PROCHOT and pl_level first: one file each, and what tells a throttle.
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

// channelLabel falls back to the channel's name (power3) without a label file.
func (r *reader) channelLabel(prefix string, ch channel, hasLabel bool) (label string, ok bool) {
	if !hasLabel {
		return ch.kind + strconv.Itoa(ch.index), true
	}
	data, ok := r.File(prefix + "_label")
	if !ok {
		return "", false
	}
	l, err := parseLabel(data)
	if err == nil && l == "" {
		err = errors.New("empty")
	}
	if err != nil {
		r.Problem(prefix+"_label", err)
		return "", false
	}
	return l, true
}

// add: hwmon gives µW, µJ and m°C, scaled from 32-bit registers in mW, mJ and c°C.
func (s *spbmFiles) add(kind, prefix, label string, hasCap bool) {
	switch kind {
	case "power":
		s.power = append(s.power, valueFile{prefix + "_input", label, 1e6, 1000, 0, maxWatts})
		if hasCap {
			s.limits = append(s.limits, valueFile{prefix + "_cap", label, 1e6, 1000, 0, maxWatts})
		}
	case "energy":
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

// maxValue: an int64 is at most 20 characters.
const maxValue = 32

func value(data []byte) ([]byte, error) {
	v := bytes.TrimSpace(data)
	switch {
	case len(v) == 0:
		return nil, errors.New("empty")
	case len(data) > maxValue:
		return nil, fmt.Errorf("%d bytes, not a number", len(data))
	}
	return v, nil
}

func parseInt(data []byte) (int64, error) {
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

func parseUint(data []byte) (uint64, error) {
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

// maxLabel: DMI strings and hwmon labels are tens of bytes.
const maxLabel = 128

// parseLabel refuses, rather than cuts, what is not a one-line attribute.
func parseLabel(data []byte) (string, error) {
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

// parseACPIName takes TSOC of "\_TZ_.TSOC"; a name segment is ACPI 6.5's NameSeg.
func parseACPIName(data []byte) (string, error) {
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
