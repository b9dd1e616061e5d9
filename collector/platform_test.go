package collector

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/go-kit/log"

	"github.com/spark-exporter/spark_exporter/internal/hostfs"
	"github.com/spark-exporter/spark_exporter/internal/layout"
	"github.com/spark-exporter/spark_exporter/internal/platform"
	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
)

// sysFixture is a fixture /sys tree, shared with the golden end-to-end
// tests.
func sysFixture(tree string) string { return filepath.Join("..", "testdata", "sys", tree) }

// onFS is a platform collector reading through fsys alone.
func onFS(fsys platform.FS, logger log.Logger) *platformCollector {
	batch := func(_ context.Context, job func(layout.FS)) error { job(fsys); return nil }
	return &platformCollector{batch: batch, now: time.Now, logger: logger}
}

func platformOn(t *testing.T, root string) map[string]float64 {
	t.Helper()
	c := newPlatformCollector(root, nopLogger())
	got, err := collect(t, c)
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	return got
}

func TestPlatformOnASparkWithSPBM(t *testing.T) {
	got := platformOn(t, sysFixture("spark"))
	for series, want := range map[string]float64{
		`spark_platform_info{bios_version="5.36_0ACUM018",board_name="P4242",product_name="NVIDIA DGX Spark",vendor="NVIDIA"}`: 1,
		`spark_platform_temperature_celsius{sensor="TSOC",source="acpi",zone="0"}`:                                             41.7,
		`spark_platform_temperature_celsius{sensor="TGPU",source="acpi",zone="5"}`:                                             41.2,
		`spark_platform_temperature_celsius{sensor="soc",source="spbm"}`:                                                       30.91,
		`spark_platform_power_watts{rail="sys_total"}`:                                                                         25.3,
		`spark_platform_power_watts{rail="syspl1"}`:                                                                            26.1,
		`spark_platform_energy_joules_total{rail="pkg"}`:                                                                       912345.678,
		`spark_platform_power_limit_watts{limit="pl1"}`:                                                                        140,
		`spark_platform_power_limit_watts{limit="syspl1"}`:                                                                     240,
		`spark_platform_prochot`:                                                                                               0,
		`spark_platform_power_limit_level`:                                                                                     0,
		`spark_platform_unreadable_files`:                                                                                      0,
		`spark_platform_field_supported{field="spbm"}`:                                                                         1,
		`spark_platform_field_supported{field="thermal_zones"}`:                                                                1,
		`spark_platform_field_supported{field="dmi"}`:                                                                          1,
	} {
		if v, ok := got[series]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", series, v, ok, want)
		}
	}
	count := func(prefix string) int {
		n := 0
		for s := range got {
			if strings.HasPrefix(s, prefix) {
				n++
			}
		}
		return n
	}
	for prefix, want := range map[string]int{
		"spark_platform_temperature_celsius{": 7 + 8, "spark_platform_power_watts{": 14,
		"spark_platform_energy_joules_total{": 4, "spark_platform_power_limit_watts{": 4,
	} {
		if n := count(prefix); n != want {
			t.Errorf("%d series %s…}, want %d", n, prefix, want)
		}
	}
	for s := range got {
		if strings.Contains(s, "NOT-TO-BE-READ") || strings.Contains(s, "dead-beef") || strings.Contains(s, "Composite") {
			t.Errorf("series %s carries a serial or another hwmon's reading", s)
		}
	}
}

// Without spbm: no power series at all, and the gap said.
func TestPlatformWithoutSPBM(t *testing.T) {
	got := platformOn(t, sysFixture("spark-nospbm"))
	for s := range got {
		for _, absent := range []string{"power_watts", "energy_joules", "power_limit", "prochot", `source="spbm"`} {
			if strings.Contains(s, absent) {
				t.Errorf("series %s without spbm", s)
			}
		}
	}
	if v, ok := got[`spark_platform_field_supported{field="spbm"}`]; !ok || v != 0 {
		t.Errorf("field_supported{spbm} = %v (present %v), want 0", v, ok)
	}
	if v := got[`spark_platform_temperature_celsius{sensor="TUNC",source="acpi",zone="6"}`]; v != 40.6 {
		t.Errorf("TUNC = %v, want 40.6", v)
	}
}

// A host without any of the three gets only the gaps, and no failure.
func TestPlatformOnAnEmptyTree(t *testing.T) {
	got := platformOn(t, t.TempDir())
	want := map[string]float64{
		`spark_platform_unreadable_files`:                       0,
		`spark_platform_field_supported{field="spbm"}`:          0,
		`spark_platform_field_supported{field="thermal_zones"}`: 0,
		`spark_platform_field_supported{field="dmi"}`:           0,
	}
	if len(got) != len(want) {
		t.Errorf("series %v, want only %v", got, want)
	}
	for s, v := range want {
		if got[s] != v {
			t.Errorf("%s = %v, want %v", s, got[s], v)
		}
	}
}

// deniedFS refuses the named files as sysfs refuses a non-root reader.
type deniedFS struct {
	platform.FS
	denied map[string]bool
}

func (d deniedFS) ReadFile(name string) ([]byte, error) {
	if d.denied[name] {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrPermission}
	}
	return d.FS.ReadFile(name)
}

// A non-root reader reads what it may and counts the rest; the collector
// still succeeds.
func TestPlatformCountsWhatItMayNotRead(t *testing.T) {
	var buf bytes.Buffer
	c := onFS(deniedFS{newSysfs(sysFixture("spark")), map[string]bool{
		"class/hwmon/hwmon1/power11_cap":     true,
		"class/thermal/thermal_zone3/temp":   true,
		"class/dmi/id/bios_version":          true,
		"class/hwmon/hwmon1/energy1_input":   true,
		"class/thermal/thermal_zone3/device": true, // not a file read: no effect
	}}, log.NewLogfmtLogger(&buf))
	got, err := collect(t, c)
	if err != nil {
		t.Fatalf("Update failed: %v", err)
	}
	if v := got["spark_platform_unreadable_files"]; v != 4 {
		t.Errorf("unreadable files = %v, want 4", v)
	}
	if _, ok := got[`spark_platform_power_limit_watts{limit="pl1"}`]; ok {
		t.Error("pl1's limit exported though unreadable")
	}
	if _, ok := got[`spark_platform_power_limit_watts{limit="pl2"}`]; !ok {
		t.Error("pl2's limit lost with pl1's")
	}
	if _, ok := got[`spark_platform_info{bios_version="",board_name="P4242",product_name="NVIDIA DGX Spark",vendor="NVIDIA"}`]; !ok {
		t.Errorf("identity without the BIOS version missing: %v", got)
	}
	if !strings.Contains(buf.String(), "class/thermal/thermal_zone3/temp") || !strings.Contains(buf.String(), "permission denied") {
		t.Errorf("the debug log does not name the file and why:\n%s", buf.String())
	}
}

// maxSysAttribute is hostfs's bound on a sysfs file: a page on arm64.
const maxSysAttribute = 64 << 10

// The bounded reader: a file larger than any attribute, a missing one and
// a name outside the tree are errors that name the file relative to the
// mount point, never the mount point.
func TestReadSysFile(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "huge"), bytes.Repeat([]byte("9"), maxSysAttribute+1), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "fits"), bytes.Repeat([]byte("9"), maxSysAttribute), 0o644); err != nil {
		t.Fatal(err)
	}
	sys := newSysfs(root)
	if data, err := sys.ReadFile("fits"); err != nil || len(data) != maxSysAttribute {
		t.Errorf("a file of the bound: %d bytes, %v", len(data), err)
	}
	var tooLarge *hostfs.TooLargeError
	for name, want := range map[string]error{"huge": nil, "missing": fs.ErrNotExist, "../etc/passwd": fs.ErrInvalid, "/etc/passwd": fs.ErrInvalid} {
		_, err := sys.ReadFile(name)
		if err == nil || (want != nil && !errors.Is(err, want)) || (want == nil && !errors.As(err, &tooLarge)) {
			t.Errorf("%s: %v, want %v", name, err, want)
			continue
		}
		if strings.Contains(err.Error(), root) {
			t.Errorf("%s: error names the mount point: %v", name, err)
		}
	}
	_, err := sys.ReadDir("nowhere")
	if !errors.Is(err, fs.ErrNotExist) || strings.Contains(err.Error(), root) {
		t.Errorf("ReadDir of a missing directory: %v", err)
	}
}

// As root, a chmod 000 file is still readable: the non-root path runs as
// nobody in cmd/spark_exporter (TestPlatformAsNonRootUser). Here, when the
// tests run unprivileged, the real EACCES.
func TestPlatformUnreadableFileOnDisk(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads a mode 000 file; the fake fs.ErrPermission case and the nobody end-to-end test cover it")
	}
	dir := testexporter.CopyTree(t, sysFixture("spark"))
	if err := os.Chmod(filepath.Join(dir, "class/thermal/thermal_zone0/temp"), 0); err != nil {
		t.Fatal(err)
	}
	if v := platformOn(t, dir)["spark_platform_unreadable_files"]; v != 1 {
		t.Errorf("unreadable files = %v, want 1", v)
	}
}

// Build hands --path.sysfs to the collector, and the log of a failure
// never names it.
func TestBuildPassesSysFS(t *testing.T) {
	app := kingpin.New("t", "")
	s := AddFlags(app)
	if _, err := app.Parse(nil); err != nil {
		t.Fatal(err)
	}
	sys := sysFixture("spark")
	env := testEnv()
	env.SysFS = sys
	e, err := s.Build(env)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	f, err := e.Filter([]string{"platform"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v := gatherAll(t, f)[`spark_platform_power_watts{rail="sys_total"}`]; v != 25.3 {
		t.Errorf("sys_total = %v, want 25.3 from the fixture", v)
	}
	msg := e.redact(&fs.PathError{Op: "open", Path: filepath.Clean(sys) + "/class/hwmon", Err: fs.ErrPermission})
	if strings.Contains(msg, "testdata") || !strings.Contains(msg, "open class/hwmon") {
		t.Errorf("redacted: %q", msg)
	}
}

// A scrape reads the values again without discovering the layout again; a
// minute later the layout is discovered afresh (a new driver shows), and a
// value file that has gone is no longer in it.
func TestPlatformKeepsTheLayoutAndRereadsValues(t *testing.T) {
	dir := testexporter.CopyTree(t, sysFixture("spark"))
	c := newPlatformCollector(dir, nopLogger())
	now := time.Unix(1e9, 0)
	c.now = func() time.Time { return now }
	write := func(rel, data string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, rel), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	scrape := func() map[string]float64 {
		t.Helper()
		got, err := collect(t, c)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	const sysTotal = `spark_platform_power_watts{rail="sys_total"}`
	scrape()
	write("class/hwmon/hwmon1/power1_input", "180500000\n")
	write("class/dmi/id/bios_version", "5.40_0ACUM020\n")
	got := scrape()
	if got[sysTotal] != 180.5 {
		t.Errorf("sys_total = %v after it changed, want 180.5", got[sysTotal])
	}
	if _, ok := got[`spark_platform_info{bios_version="5.36_0ACUM018",board_name="P4242",product_name="NVIDIA DGX Spark",vendor="NVIDIA"}`]; !ok {
		t.Error("the identity was read again within the minute")
	}
	now = now.Add(layout.Every)
	got = scrape()
	if _, ok := got[`spark_platform_info{bios_version="5.40_0ACUM020",board_name="P4242",product_name="NVIDIA DGX Spark",vendor="NVIDIA"}`]; !ok {
		t.Errorf("the identity not read again after a minute: %v", got)
	}

	if err := os.Remove(filepath.Join(dir, "class/hwmon/hwmon1/power2_input")); err != nil {
		t.Fatal(err)
	}
	now = now.Add(layout.Every)
	got = scrape()
	if _, ok := got[`spark_platform_power_watts{rail="soc_pkg"}`]; ok {
		t.Error("a removed rail is still exported after discovery")
	}
	if got[sysTotal] != 180.5 || got["spark_platform_unreadable_files"] != 0 {
		t.Errorf("sys_total %v, unreadable %v", got[sysTotal], got["spark_platform_unreadable_files"])
	}
}

// A value file is a number: 64 bytes or more is refused, counted, and the
// other values still read.
func TestPlatformRefusesALongValue(t *testing.T) {
	dir := testexporter.CopyTree(t, sysFixture("spark"))
	if err := os.WriteFile(filepath.Join(dir, "class/hwmon/hwmon1/power1_input"), bytes.Repeat([]byte("1"), 100), 0o644); err != nil {
		t.Fatal(err)
	}
	got := platformOn(t, dir)
	if _, ok := got[`spark_platform_power_watts{rail="sys_total"}`]; ok || got["spark_platform_unreadable_files"] != 1 {
		t.Errorf("a 100-byte value: %v", got)
	}
	if got[`spark_platform_power_watts{rail="gpu"}`] != 5.1 {
		t.Errorf("gpu rail lost beside a bad one")
	}
}

// A value file whose read blocks (a driver stuck in its firmware call)
// fails the collector at the deadline naming the file relative to
// --path.sysfs; the next scrape discovers the layout again and fails at
// once while the read is still blocked; once it returns, the values read.
func TestPlatformBlockedValueFile(t *testing.T) {
	dir := testexporter.CopyTree(t, sysFixture("spark"))
	const rail = "class/hwmon/hwmon1/power3_input"
	path := filepath.Join(dir, rail)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
	c := newPlatformCollector(dir, nopLogger())
	_, err := collectWithin(t, c, 50*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), rail+": blocked: no answer within 50ms") || strings.Contains(err.Error(), dir) {
		t.Fatalf("a blocked value file: %v", err)
	}
	if c.layout.Has() {
		t.Error("the layout is kept after a blocked read")
	}
	if _, err = collectWithin(t, c, 50*time.Millisecond); err == nil || !strings.Contains(err.Error(), rail+": still blocked") {
		t.Fatalf("the next scrape while the read is blocked: %v, want still blocked naming the file", err)
	}

	w, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	os.Remove(path)
	if err := os.WriteFile(path, []byte("4200000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var got map[string]float64
	testexporter.Eventually(t, 10*time.Second, func() bool {
		got, err = collect(t, c)
		return err == nil
	}, "a scrape once the blocked read returned")
	if len(got) == 0 || got["spark_platform_unreadable_files"] != 0 {
		t.Errorf("after the read returned: %v", got)
	}
}

// sysfs as a layout.FS of its own, each read a batch outside any collector
// run, for the tests that walk a tree without a collector.
func (d *sysfs) ReadFile(name string) (data []byte, err error) {
	if blocked := d.batch(context.Background(), func(fsys layout.FS) { data, err = fsys.ReadFile(name) }); blocked != nil {
		return nil, blocked
	}
	return data, err
}

func (d *sysfs) ReadDir(name string) (entries []fs.DirEntry, err error) {
	if blocked := d.batch(context.Background(), func(fsys layout.FS) { entries, err = fsys.ReadDir(name) }); blocked != nil {
		return nil, blocked
	}
	return entries, err
}
