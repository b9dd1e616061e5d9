package platform

import (
	"io/fs"
	"math"
	"os"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"
	"unicode/utf8"
)

const fixtures = "../../testdata/sys/"

func ptr[T any](v T) *T { return &v }

func discover(fsys FS) *Layout { return DiscoverAtMost(fsys, math.MaxInt) }

func readAll(fsys FS) Snapshot { return discover(fsys).Read(fsys.ReadFile) }

func sparkZones() []Temperature {
	return []Temperature{
		{"acpi", "TSOC", "0", 41.7}, {"acpi", "TS0E", "1", 39.8}, {"acpi", "TS0P", "2", 40.3},
		{"acpi", "TS1E", "3", 38.9}, {"acpi", "TS1P", "4", 40.1}, {"acpi", "TGPU", "5", 41.2},
		{"acpi", "TUNC", "6", 40.6},
	}
}

var sparkIdentity = &Identity{Vendor: "NVIDIA", ProductName: "NVIDIA DGX Spark", BoardName: "P4242", BIOSVersion: "5.36_0ACUM018"}

func TestFixtureTrees(t *testing.T) {
	cases := map[string]Snapshot{
		"spark": {
			Identity: sparkIdentity,
			Zones:    sparkZones(),
			SPBM: &SPBM{
				Power: []Reading{{"sys_total", 25.3}, {"soc_pkg", 17.1}, {"cpu_gpu", 6.2}, {"cpu_p", 0.512},
					{"cpu_e", 0.011}, {"vcore", 4.05}, {"dc_input", 26.4}, {"gpu", 5.1}, {"prereg", 8.2},
					{"dla", 0.098}, {"pl1", 18.4}, {"pl2", 18.6}, {"syspl1", 26.1}, {"syspl2", 26.9}},
				Energy: []Reading{{"pkg", 912345.678}, {"cpu_e", 1234.567}, {"cpu_p", 98765.432}, {"gpu", 345678.901}},
				Limits: []Reading{{"pl1", 140}, {"pl2", 200}, {"syspl1", 240}, {"syspl2", 260}},
				Temps: []Reading{{"tj_max", 31.25}, {"cpu_e_clu0", 30.98}, {"cpu_p_clu0", 31.1}, {"cpu_e_clu1", 30.87},
					{"cpu_p_clu1", 31.04}, {"gpu", 30.76}, {"soc", 30.91}, {"dla", 27.1}},
				Prochot: ptr(false),
				PLLevel: ptr(uint64(0)),
			},
		},
		"spark-nospbm": {Identity: sparkIdentity, Zones: sparkZones()},
		"x86-server": {
			Identity: &Identity{Vendor: "Supermicro", ProductName: "SYS-1029P-WTR", BoardName: "X11DDW-L", BIOSVersion: "3.4"},
			Zones:    []Temperature{{"acpi", "TZ00", "0", 27.8}, {"thermal_zone", "x86_pkg_temp", "1", 45}},
		},
	}
	for tree, want := range cases {
		t.Run(tree, func(t *testing.T) {
			got := readAll(os.DirFS(fixtures + tree).(FS))
			if len(got.Problems) > 0 {
				t.Errorf("problems on a clean tree: %v", got.Problems)
			}
			got.Problems = nil
			if got.SPBM != nil && want.SPBM != nil {
				// Float sums: compare within a rounding error.
				approx(t, "power", got.SPBM.Power, want.SPBM.Power)
				approx(t, "energy", got.SPBM.Energy, want.SPBM.Energy)
				approx(t, "limits", got.SPBM.Limits, want.SPBM.Limits)
				approx(t, "temps", got.SPBM.Temps, want.SPBM.Temps)
				got.SPBM.Power, got.SPBM.Energy, got.SPBM.Limits, got.SPBM.Temps = nil, nil, nil, nil
				want.SPBM.Power, want.SPBM.Energy, want.SPBM.Limits, want.SPBM.Temps = nil, nil, nil, nil
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("Read = %+v\nwant %+v", got, want)
			}
		})
	}
}

func approx(t *testing.T, what string, got, want []Reading) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %v, want %v", what, got, want)
		return
	}
	for i := range got {
		d := got[i].Value - want[i].Value
		if got[i].Name != want[i].Name || d > 1e-9 || d < -1e-9 {
			t.Errorf("%s[%d] = %v, want %v", what, i, got[i], want[i])
		}
	}
}

// A host with none of it: nothing, and nothing wrong.
func TestEmptyTree(t *testing.T) {
	got := readAll(fstest.MapFS{})
	if !reflect.DeepEqual(got, Snapshot{}) {
		t.Errorf("Read of an empty tree = %+v", got)
	}
}

// faultyFS is a tree whose named files or directories fail with an error.
type faultyFS struct {
	fstest.MapFS
	fail   map[string]error
	opened []string
}

func (f *faultyFS) ReadFile(name string) ([]byte, error) {
	f.opened = append(f.opened, name)
	if err := f.fail[name]; err != nil {
		return nil, &fs.PathError{Op: "read", Path: "/secret/mount/" + name, Err: err}
	}
	return f.MapFS.ReadFile(name)
}

func (f *faultyFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if err := f.fail[name]; err != nil {
		return nil, &fs.PathError{Op: "open", Path: "/secret/mount/" + name, Err: err}
	}
	return f.MapFS.ReadDir(name)
}

// mapOf loads a fixture tree into memory, to be damaged.
func mapOf(t *testing.T, tree string) fstest.MapFS {
	t.Helper()
	m := fstest.MapFS{}
	root := os.DirFS(fixtures + tree)
	err := fs.WalkDir(root, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(root, path)
		m[path] = &fstest.MapFile{Data: data}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func problemFiles(s Snapshot) map[string]string {
	out := map[string]string{}
	for _, p := range s.Problems {
		out[p.File] = p.Err.Error()
	}
	return out
}

// Each kind of bad file costs its own reading, is reported with the file it
// came from and why, and leaves every other reading in place.
func TestBadFilesCostOnlyTheirReading(t *testing.T) {
	const (
		zone0 = "class/thermal/thermal_zone0/"
		spbm  = "class/hwmon/hwmon1/"
	)
	cases := []struct {
		name    string
		data    map[string]string // replaced contents
		fail    map[string]error  // read errors
		problem string            // the file reported
		reason  string            // in its error
		check   func(t *testing.T, s Snapshot)
	}{
		{name: "an ACPI zone that errors on read", fail: map[string]error{zone0 + "temp": syscall.EIO},
			problem: zone0 + "temp", reason: "input/output error",
			check: func(t *testing.T, s Snapshot) { zones(t, s, 6, "TSOC", false) }},
		{name: "a zone without data", fail: map[string]error{zone0 + "temp": syscall.ENODATA},
			problem: zone0 + "temp", reason: "no data",
			check: func(t *testing.T, s Snapshot) { zones(t, s, 6, "TSOC", false) }},
		{name: "a zone temperature of garbage", data: map[string]string{zone0 + "temp": "hot\n"},
			problem: zone0 + "temp", reason: "not an integer",
			check: func(t *testing.T, s Snapshot) { zones(t, s, 6, "TSOC", false) }},
		{name: "an empty zone temperature", data: map[string]string{zone0 + "temp": ""},
			problem: zone0 + "temp", reason: "empty",
			check: func(t *testing.T, s Snapshot) { zones(t, s, 6, "TSOC", false) }},
		{name: "a huge zone temperature", data: map[string]string{zone0 + "temp": strings.Repeat("9", 70000)},
			problem: zone0 + "temp", reason: "not a number",
			check: func(t *testing.T, s Snapshot) { zones(t, s, 6, "TSOC", false) }},
		{name: "an ACPI path of garbage names the zone by its type", data: map[string]string{zone0 + "device/path": "\x00\xff"},
			problem: zone0 + "device/path", reason: "not an ACPI path",
			check: func(t *testing.T, s Snapshot) {
				zones(t, s, 7, "TSOC", false)
				if s.Zones[0].Source != "thermal_zone" || s.Zones[0].Sensor != "acpitz" {
					t.Errorf("zone 0 = %+v, want the thermal_zone acpitz", s.Zones[0])
				}
			}},
		{name: "a DMI file only root may read", fail: map[string]error{"class/dmi/id/bios_version": fs.ErrPermission},
			problem: "class/dmi/id/bios_version", reason: "permission denied",
			check: func(t *testing.T, s Snapshot) {
				if s.Identity == nil || s.Identity.BIOSVersion != "" || s.Identity.BoardName != "P4242" {
					t.Errorf("identity = %+v, want all but the BIOS version", s.Identity)
				}
			}},
		{name: "a DMI string of many lines", data: map[string]string{"class/dmi/id/product_name": "a\nb\n"},
			problem: "class/dmi/id/product_name", reason: "control character",
			check: func(t *testing.T, s Snapshot) {
				if s.Identity == nil || s.Identity.ProductName != "" || s.Identity.Vendor != "NVIDIA" {
					t.Errorf("identity = %+v", s.Identity)
				}
			}},
		{name: "an unreadable hwmon directory", fail: map[string]error{"class/hwmon": fs.ErrPermission},
			problem: "class/hwmon", reason: "permission denied",
			check: func(t *testing.T, s Snapshot) {
				if s.SPBM != nil || len(s.Zones) != 7 || s.Identity == nil {
					t.Errorf("snapshot = %+v, want zones and identity without spbm", s)
				}
			}},
		{name: "an spbm rail of garbage", data: map[string]string{spbm + "power1_input": "-5\n"},
			problem: spbm + "power1_input", reason: "not an unsigned integer",
			check: func(t *testing.T, s Snapshot) { rails(t, s, 13, "sys_total", false) }},
		{name: "an all-ones spbm register", data: map[string]string{spbm + "power7_input": "4294967295000\n"},
			problem: spbm + "power7_input", reason: "all-ones",
			check: func(t *testing.T, s Snapshot) { rails(t, s, 13, "dc_input", false) }},
		// Error codes read as values are no readings.
		{name: "a zone at absolute zero", data: map[string]string{zone0 + "temp": "-273150\n"},
			problem: zone0 + "temp", reason: "outside the plausible",
			check: func(t *testing.T, s Snapshot) { zones(t, s, 6, "TSOC", false) }},
		{name: "a zone at 9.2e15 °C", data: map[string]string{zone0 + "temp": "9223372036854775807\n"},
			problem: zone0 + "temp", reason: "outside the plausible",
			check: func(t *testing.T, s Snapshot) { zones(t, s, 6, "TSOC", false) }},
		{name: "a 64-bit all-ones spbm rail", data: map[string]string{spbm + "power7_input": "18446744073709551615\n"},
			problem: spbm + "power7_input", reason: "outside the plausible",
			check: func(t *testing.T, s Snapshot) { rails(t, s, 13, "dc_input", false) }},
		{name: "a 64-bit all-ones spbm temperature", data: map[string]string{spbm + "temp2_input": "18446744073709551615\n"},
			problem: spbm + "temp2_input", reason: "outside the plausible",
			check: func(t *testing.T, s Snapshot) {
				if len(s.SPBM.Temps) != 7 {
					t.Errorf("temps = %v, want the seven plausible", s.SPBM.Temps)
				}
			}},
		{name: "a right-to-left override in the BIOS version", data: map[string]string{"class/dmi/id/bios_version": "5.36\u202e810MUCA0_\n"},
			problem: "class/dmi/id/bios_version", reason: "format character U+202E",
			check: func(t *testing.T, s Snapshot) {
				if s.Identity == nil || s.Identity.BIOSVersion != "" || s.Identity.Vendor != "NVIDIA" {
					t.Errorf("identity = %+v, want all but the BIOS version", s.Identity)
				}
			}},
		{name: "an escape sequence in a product name", data: map[string]string{"class/dmi/id/product_name": "\x1b[2JSpark\n"},
			problem: "class/dmi/id/product_name", reason: "control character U+001B",
			check: func(t *testing.T, s Snapshot) {
				if s.Identity == nil || s.Identity.ProductName != "" {
					t.Errorf("identity = %+v", s.Identity)
				}
			}},
		{name: "two spbm rails with one label", data: map[string]string{spbm + "power2_label": "sys_total\n"},
			problem: spbm + "power2_label", reason: "repeats",
			check: func(t *testing.T, s Snapshot) { rails(t, s, 13, "sys_total", true) }},
		{name: "an unreadable power cap", fail: map[string]error{spbm + "power11_cap": fs.ErrPermission},
			problem: spbm + "power11_cap", reason: "permission denied",
			check: func(t *testing.T, s Snapshot) {
				rails(t, s, 14, "pl1", true)
				if len(s.SPBM.Limits) != 3 {
					t.Errorf("limits = %v, want the three readable", s.SPBM.Limits)
				}
			}},
		{name: "prochot of garbage", data: map[string]string{spbm + "prochot": "yes\n"},
			problem: spbm + "prochot", reason: "not an unsigned integer",
			check: func(t *testing.T, s Snapshot) {
				if s.SPBM == nil || s.SPBM.Prochot != nil || len(s.SPBM.Power) != 14 {
					t.Errorf("spbm = %+v, want every rail and no prochot", s.SPBM)
				}
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := mapOf(t, "spark")
			for name, data := range tc.data {
				m[name] = &fstest.MapFile{Data: []byte(data)}
			}
			s := readAll(&faultyFS{MapFS: m, fail: tc.fail})
			problems := problemFiles(s)
			if len(problems) != 1 || !strings.Contains(problems[tc.problem], tc.reason) {
				t.Errorf("problems = %v, want %s: …%s…", problems, tc.problem, tc.reason)
			}
			for _, p := range s.Problems {
				if strings.Contains(p.Error(), "secret") {
					t.Errorf("problem names the mount point: %v", p)
				}
			}
			tc.check(t, s)
		})
	}
}

func zones(t *testing.T, s Snapshot, n int, sensor string, want bool) {
	t.Helper()
	found := false
	for _, z := range s.Zones {
		found = found || z.Sensor == sensor
	}
	if len(s.Zones) != n || found != want {
		t.Errorf("zones = %+v, want %d with %s present=%v", s.Zones, n, sensor, want)
	}
}

func rails(t *testing.T, s Snapshot, n int, rail string, want bool) {
	t.Helper()
	if s.SPBM == nil {
		t.Fatal("no spbm")
	}
	found := false
	for _, r := range s.SPBM.Power {
		found = found || r.Name == rail
	}
	if len(s.SPBM.Power) != n || found != want {
		t.Errorf("rails = %+v, want %d with %s present=%v", s.SPBM.Power, n, rail, want)
	}
}

// Serial numbers and UUIDs are never opened, readable or not.
func TestSerialsAreNeverRead(t *testing.T) {
	f := &faultyFS{MapFS: mapOf(t, "spark")}
	readAll(f)
	for _, name := range f.opened {
		if strings.Contains(name, "serial") || strings.Contains(name, "uuid") {
			t.Errorf("opened %s", name)
		}
	}
	if len(f.opened) == 0 {
		t.Fatal("nothing opened")
	}
}

// Zones sort by index as numbers, and a channel without a label file is
// named by its channel.
func TestOrderAndUnlabelledChannels(t *testing.T) {
	m := fstest.MapFS{
		"class/thermal/thermal_zone10/temp": {Data: []byte("1000\n")},
		"class/thermal/thermal_zone10/type": {Data: []byte("b\n")},
		"class/thermal/thermal_zone9/temp":  {Data: []byte("-2000\n")},
		"class/thermal/thermal_zone9/type":  {Data: []byte("a\n")},
		"class/thermal/thermal_zoneX/temp":  {Data: []byte("1\n")},
		"class/hwmon/hwmon3/name":           {Data: []byte("spbm\n")},
		"class/hwmon/hwmon3/power2_input":   {Data: []byte("1000000\n")},
		"class/hwmon/hwmon3/power2_max":     {Data: []byte("9\n")},
	}
	s := readAll(m)
	want := []Temperature{{"thermal_zone", "a", "9", -2}, {"thermal_zone", "b", "10", 1}}
	if !reflect.DeepEqual(s.Zones, want) {
		t.Errorf("zones = %+v, want %+v", s.Zones, want)
	}
	if s.SPBM == nil || !reflect.DeepEqual(s.SPBM.Power, []Reading{{"power2", 1}}) || s.SPBM.Prochot != nil {
		t.Errorf("spbm = %+v", s.SPBM)
	}
	if len(s.Problems) != 0 {
		t.Errorf("problems: %v", s.Problems)
	}
}

func TestParseACPIName(t *testing.T) {
	for in, want := range map[string]string{
		"\\_TZ_.TSOC\n": "TSOC", "\\_SB_.PCI0.TZ00": "TZ00", "\\TZ0_": "TZ0_", "\\_TZ_.T1": "T1",
	} {
		if got, err := parseACPIName([]byte(in)); err != nil || got != want {
			t.Errorf("ParseACPIName(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "TSOC", "\\_TZ_.", "\\_TZ_.TOOLONG", "\\_TZ_.tsoc", "\\_TZ_.1ABC", "\\_TZ_.T\xff"} {
		if got, err := parseACPIName([]byte(in)); err == nil {
			t.Errorf("ParseACPIName(%q) = %q, want an error", in, got)
		}
	}
}

func TestParseIntegers(t *testing.T) {
	if v, err := parseInt([]byte("-1500\n")); err != nil || v != -1500 {
		t.Errorf("ParseInt(-1500) = %d, %v", v, err)
	}
	if v, err := parseUint([]byte("25300000\n")); err != nil || v != 25300000 {
		t.Errorf("ParseUint = %d, %v", v, err)
	}
	for _, in := range []string{"", "\n", "1.5", "0x10", "1 2", "99999999999999999999"} {
		if _, err := parseInt([]byte(in)); err == nil {
			t.Errorf("ParseInt(%q) accepted", in)
		}
	}
	if _, err := parseUint([]byte("-1")); err == nil {
		t.Error("ParseUint(-1) accepted")
	}
}

func TestParseLabel(t *testing.T) {
	if v, err := parseLabel([]byte("  NVIDIA DGX Spark \n")); err != nil || v != "NVIDIA DGX Spark" {
		t.Errorf("ParseLabel = %q, %v", v, err)
	}
	if v, err := parseLabel([]byte("caf\xe9")); err != nil || v != "caf\uFFFD" {
		t.Errorf("invalid UTF-8: %q, %v", v, err)
	}
	for _, in := range []string{"a\nb", "a\x00b", strings.Repeat("x", maxLabel+1)} {
		if _, err := parseLabel([]byte(in)); err == nil {
			t.Errorf("ParseLabel(%q) accepted", in)
		}
	}
}

func FuzzParseACPIName(f *testing.F) {
	for _, s := range []string{"\\_TZ_.TSOC\n", "\\_SB_.PCI0.TZ00", "", "\\", "\\_TZ_.tsoc"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		name, err := parseACPIName(data)
		if err != nil {
			return
		}
		if name == "" || len(name) > 4 || strings.Trim(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") != "" {
			t.Errorf("ParseACPIName(%q) = %q", data, name)
		}
	})
}

func FuzzParseLabel(f *testing.F) {
	for _, s := range []string{"NVIDIA\n", "P4242", "", "caf\xe9", "a\nb"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := parseLabel(data)
		if err != nil {
			return
		}
		if !utf8.ValidString(v) || len(v) > maxLabel || strings.ContainsAny(v, "\n\r\x00") || strings.TrimSpace(v) != v {
			t.Errorf("ParseLabel(%q) = %q", data, v)
		}
	})
}

func FuzzParseInt(f *testing.F) {
	for _, s := range []string{"41700\n", "-1", "", "4294967295000", "1e3"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		parseInt(data)
		if v, err := parseUint(data); err == nil && len(data) == 0 {
			t.Errorf("ParseUint(empty) = %d", v)
		}
	})
}

// The whole walk, with the fuzzer's bytes in every file of the Spark tree
// in turn: it never panics, never gives two readings one name, and every
// name is valid UTF-8.
func FuzzRead(f *testing.F) {
	m := fstest.MapFS{}
	root := os.DirFS(fixtures + "spark")
	var names []string
	if err := fs.WalkDir(root, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(root, path)
		m[path] = &fstest.MapFile{Data: data}
		names = append(names, path)
		return err
	}); err != nil {
		f.Fatal(err)
	}
	f.Add(uint(0), []byte("garbage"))
	f.Add(uint(3), []byte("4294967295000\n"))
	f.Add(uint(7), []byte("sys_total\n"))
	f.Fuzz(func(t *testing.T, which uint, data []byte) {
		name := names[which%uint(len(names))]
		old := m[name]
		m[name] = &fstest.MapFile{Data: data}
		defer func() { m[name] = old }()
		s := readAll(m)
		checkUnique := func(kind string, rs []Reading) {
			seen := map[string]bool{}
			for _, r := range rs {
				if seen[r.Name] || !utf8.ValidString(r.Name) {
					t.Errorf("%s %q repeated or invalid (file %s = %q)", kind, r.Name, name, data)
				}
				seen[r.Name] = true
			}
		}
		if s.SPBM != nil {
			checkUnique("power", s.SPBM.Power)
			checkUnique("energy", s.SPBM.Energy)
			checkUnique("limit", s.SPBM.Limits)
			checkUnique("temp", s.SPBM.Temps)
		}
		zones := map[string]bool{}
		for _, z := range s.Zones {
			if zones[z.Zone] || !utf8.ValidString(z.Sensor) {
				t.Errorf("zone %+v repeated or invalid", z)
			}
			zones[z.Zone] = true
		}
	})
}

// A layout read again sees new values without discovering again; a file
// that has gone (or a driver unbound under it) says the layout is stale.
func TestLayoutReadAgainAndStale(t *testing.T) {
	m := mapOf(t, "spark")
	l := discover(m)
	const rail = "class/hwmon/hwmon1/power1_input"
	m[rail] = &fstest.MapFile{Data: []byte("99000000\n")}
	s := l.Read(m.ReadFile)
	if s.Stale || len(s.Problems) != 0 || s.SPBM.Power[0] != (Reading{"sys_total", 99}) {
		t.Errorf("read again: stale %v, problems %v, %v", s.Stale, s.Problems, s.SPBM.Power[0])
	}
	delete(m, rail)
	if s := l.Read(m.ReadFile); !s.Stale || len(s.Problems) != 0 || len(s.SPBM.Power) != 13 {
		t.Errorf("a file gone: stale %v, problems %v, %d rails", s.Stale, s.Problems, len(s.SPBM.Power))
	}
	unbound := func(name string) ([]byte, error) {
		if strings.HasPrefix(name, "class/hwmon/hwmon1/") {
			return nil, &fs.PathError{Op: "read", Path: name, Err: syscall.ENODEV}
		}
		return m.ReadFile(name)
	}
	if s := l.Read(unbound); !s.Stale || s.SPBM == nil || len(s.SPBM.Power) != 0 || len(s.Zones) != 7 {
		t.Errorf("driver unbound: stale %v, spbm %+v, %d zones", s.Stale, s.SPBM, len(s.Zones))
	}
}

// valueFiles are the files a read of l reads.
func valueFiles(l *Layout, fsys FS) []string {
	var read []string
	l.Read(func(name string) ([]byte, error) {
		read = append(read, name)
		return fsys.ReadFile(name)
	})
	return read
}

// Thousands of thermal zones and spbm channels cost a
// read no more than the cap's value files: the spbm channels first, then
// the zones by index, the rest counted and the first named.
func TestDiscoverAtMostCapsTheValueFiles(t *testing.T) {
	m := mapOf(t, "spark")
	for i := 7; i < 1000; i++ {
		dir := "class/thermal/thermal_zone" + strconv.Itoa(i) + "/"
		m[dir+"type"] = &fstest.MapFile{Data: []byte("fake\n")}
		m[dir+"temp"] = &fstest.MapFile{Data: []byte("40000\n")}
	}
	for i := 100; i < 400; i++ {
		m["class/hwmon/hwmon1/temp"+strconv.Itoa(i)+"_input"] = &fstest.MapFile{Data: []byte("3100\n")}
	}
	full := discover(m)
	if n := len(valueFiles(full, m)); n != 1000+30+300+2 {
		t.Fatalf("uncapped: %d value files", n)
	}
	const max = 256
	l := DiscoverAtMost(m, max)
	if n := len(valueFiles(l, m)); n != max {
		t.Errorf("capped at %d: %d value files", max, n)
	}
	// The Spark's 32 spbm files, 224 of the 300 extra channels, no zone.
	left, first := l.LeftOut()
	if want := 1000 + 30 + 300 + 2 - max; left != want || first != "class/hwmon/hwmon1/temp324_input" {
		t.Errorf("left out %d, first %q; want %d, the first temperature channel beyond the cap", left, first, want)
	}
	s := l.Read(m.ReadFile)
	if len(s.Zones) != 0 || s.SPBM == nil || len(s.SPBM.Power) != 14 || s.SPBM.Prochot == nil {
		t.Errorf("capped read: %d zones, spbm %+v", len(s.Zones), s.SPBM)
	}
	// Room for zones: the first by index.
	l = DiscoverAtMost(mapOf(t, "spark"), 35)
	if s := l.Read(m.ReadFile); len(s.Zones) != 3 || s.Zones[2].Zone != "2" {
		t.Errorf("with room for three zones: %+v", s.Zones)
	}
	if left, first := l.LeftOut(); left != 4 || first != "class/thermal/thermal_zone3/temp" {
		t.Errorf("left out %d, first %q; want the four zones after the third", left, first)
	}
}
