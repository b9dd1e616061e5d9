package main

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
	"github.com/spark-exporter/spark_exporter/internal/thermallog"
)

// Faults of the files the exporter writes (--thermal.csv-file) and of the
// user it runs as. docs/robustness.md lists them.

// fastThermal samples ten times a second, so that CSV rows come quickly.
var fastThermal = []string{"--thermal.interval=100ms", "--thermal.window=1s"}

// csvRows reads the CSV log: its complete rows, and whether the file ends
// mid-line. Every row must parse.
func csvRows(t *testing.T, path string) (headers, rows int, cut bool) {
	t.Helper()
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, 0, false
	}
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	cut = text != "" && !strings.HasSuffix(text, "\n")
	if _, err := thermallog.Parse(strings.NewReader(text)); err != nil {
		t.Fatalf("the CSV log does not parse: %v\n%s", err, text)
	}
	for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		switch {
		case line == thermallog.Header:
			headers++
		case line != "":
			rows++
		}
	}
	return headers, rows, cut
}

// SIGTERM closes the CSV log on a complete row and the exporter exits 0; a
// restarted exporter appends to the same log under its one header.
func TestThermalCSVAcrossSIGTERMAndRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "thermal.csv")
	args := append([]string{"--path.procfs=" + fixtureDir(t, "spark"), "--gpu.nvml-library=" + testexporter.StandInNVML(t),
		"--thermal.csv-file=" + path}, fastThermal...)
	var before int
	for run := range 2 {
		p := testexporter.Start(t, nil, args...)
		testexporter.Eventually(t, 30*time.Second, func() bool {
			_, rows, _ := csvRows(t, path)
			return rows >= before+3
		}, "three more rows in the CSV log")
		if code := p.Stop(t); code != 0 {
			t.Errorf("run %d: exit %d after SIGTERM, want 0", run, code)
		}
		headers, rows, cut := csvRows(t, path)
		if headers != 1 || cut {
			t.Errorf("run %d: %d headers, last line cut: %v; want one header and complete rows", run, headers, cut)
		}
		before = rows
		logs := p.Logs()
		if !strings.Contains(logs, "shutting down") || strings.Contains(logs, "level=error") || strings.Contains(logs, "level=warn") {
			t.Errorf("run %d: shutdown not clean:\n%s", run, logs)
		}
	}
}

// mountTmpfs mounts a tmpfs of size bytes at dir with extra options, and
// unmounts it when the test ends. It skips the test where the test process
// may not mount (not root, or no CAP_SYS_ADMIN): CI and the development
// machines run tests as root.
func mountTmpfs(t *testing.T, dir, options string) {
	t.Helper()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, options); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v): this row of docs/robustness.md needs root", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	})
}

// fillUp writes into dir until the filesystem is full and returns the
// filler's path.
func fillUp(t *testing.T, dir string) string {
	t.Helper()
	filler := filepath.Join(dir, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	block := make([]byte, 4096)
	for {
		if _, err := f.Write(block); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling the tmpfs: %v", err)
			}
			return filler
		}
	}
}

// A CSV log on a full disk: appends fail, are counted and logged once,
// without the path; the GPU and the other collectors are reported as
// before; once space is freed the log resumes by itself, with its header.
func TestThermalCSVOnAFullDisk(t *testing.T) {
	dir := t.TempDir()
	mountTmpfs(t, dir, "size=64k")
	filler := fillUp(t, dir)
	path := filepath.Join(dir, "thermal.csv")
	p := testexporter.Start(t, nil, append([]string{"--path.procfs=" + fixtureDir(t, "spark"),
		"--gpu.nvml-library=" + testexporter.StandInNVML(t), "--thermal.csv-file=" + path}, fastThermal...)...)

	m := poll(t, p, "CSV write errors counted", func(m string) bool {
		v, _ := testexporter.Value(m, "spark_thermal_csv_write_errors_total")
		return v >= 3
	})
	for _, series := range []string{
		`spark_scrape_collector_success{collector="thermal"}`, `spark_scrape_collector_success{collector="pool"}`,
		`spark_scrape_collector_success{collector="gpu"}`,
	} {
		if v, _ := testexporter.Value(m, series); v != 1 {
			t.Errorf("%s = %v with the disk full, want 1", series, v)
		}
	}
	if _, ok := testexporter.Value(m, `spark_thermal_state{gpu="0",state="collecting"}`); !ok {
		t.Error("no thermal state while the log cannot be written")
	}

	os.Remove(filler)
	var rows int
	poll(t, p, "the CSV log to resume", func(string) bool {
		_, rows, _ = csvRows(t, path)
		return rows >= 1
	})
	errs, _ := testexporter.Value(boundedGet(t, p, "/metrics"), "spark_thermal_csv_write_errors_total")
	poll(t, p, "more rows in the resumed CSV log", func(string) bool {
		_, more, _ := csvRows(t, path)
		return more >= rows+3
	})
	if now, _ := testexporter.Value(boundedGet(t, p, "/metrics"), "spark_thermal_csv_write_errors_total"); now != errs {
		t.Errorf("write errors went from %v to %v after the log resumed", errs, now)
	}
	p.Stop(t)
	if headers, _, cut := csvRows(t, path); headers != 1 || cut {
		t.Errorf("after the disk was freed: %d headers, last line cut %v", headers, cut)
	}
	logs := p.Logs()
	if n := strings.Count(logs, "cannot append to --thermal.csv-file"); n != 1 {
		t.Errorf("the full disk was logged %d times, want once:\n%s", n, logs)
	}
	if !strings.Contains(logs, "no space left on device") || !strings.Contains(logs, "appending to --thermal.csv-file again") {
		t.Errorf("the log does not say why appends failed, or that they resumed:\n%s", logs)
	}
	if strings.Contains(logs, dir) {
		t.Errorf("the log names the CSV file's path:\n%s", logs)
	}
}

// nobody is the unprivileged user the non-root tests run the exporter as.
var nobody = &syscall.Credential{Uid: 65534, Gid: 65534}

// nobodyCopy copies the file at src into dir, readable and executable by
// all: the test binary and stand-in live under private temporary
// directories that nobody cannot enter.
func nobodyCopy(t *testing.T, src, dir string) string {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	dst := filepath.Join(dir, filepath.Base(src))
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return dst
}

// startAsNobody runs the exporter as nobody, from a copy of the binary
// under base, with the stand-in NVML library copied there too.
func startAsNobody(t *testing.T, base string, args ...string) *testexporter.Process {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("switching to nobody needs root: this row of docs/robustness.md runs in CI, as root")
	}
	bin := nobodyCopy(t, testexporter.Binary(t), base)
	lib := nobodyCopy(t, testexporter.StandInNVML(t), base)
	cmd := exec.Command(bin, append([]string{"--web.listen-address=127.0.0.1:0", "--gpu.nvml-library=" + lib}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: nobody}
	cmd.Dir = base
	return testexporter.StartCommand(t, cmd, nil)
}

// nobodyDir makes a directory that nobody can read and enter but not
// write, outside the test's private temporary directory.
func nobodyDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "spark-nonroot-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// The exporter run as an unprivileged user on a copy of the fixtures:
// /proc entries it may not read (owned by root, mode 0700, as hidepid=1
// shows other users' processes) are counted as unreadable and the
// workloads it can read are still found; a CSV log in a directory it may
// not write is counted and logged once, and every collector keeps working.
func TestRunsAsNonRootUser(t *testing.T) {
	base := nobodyDir(t)
	procfs := filepath.Join(base, "proc")
	if err := os.CopyFS(procfs, os.DirFS(fixtureDir(t, "spark"))); err != nil {
		t.Fatal(err)
	}
	err := filepath.WalkDir(procfs, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if d.IsDir() {
			mode = 0o755
		}
		return os.Chmod(path, mode)
	})
	if err != nil {
		t.Fatal(err)
	}
	// sshd and the login shell: processes of other users.
	for _, pid := range []string{"2005", "2010"} {
		if err := os.Chmod(filepath.Join(procfs, pid), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	readOnly := filepath.Join(base, "logs") // root's, 0755: not nobody's to write
	if err := os.Mkdir(readOnly, 0o755); err != nil {
		t.Fatal(err)
	}

	p := startAsNobody(t, base, append([]string{"--path.procfs=" + procfs,
		"--thermal.csv-file=" + filepath.Join(readOnly, "thermal.csv")}, fastThermal...)...)
	m := poll(t, p, "CSV write errors counted", func(m string) bool {
		v, _ := testexporter.Value(m, "spark_thermal_csv_write_errors_total")
		return v >= 2
	})
	for series, want := range map[string]float64{
		`spark_scrape_collector_success{collector="pool"}`:      1,
		`spark_scrape_collector_success{collector="gpu"}`:       1,
		`spark_scrape_collector_success{collector="thermal"}`:   1,
		`spark_scrape_collector_success{collector="workloads"}`: 1,
		"spark_workload_unreadable_processes":                   2,
		`spark_workloads{role="inference"}`:                     1,
		`spark_workloads{role="training"}`:                      1,
		"spark_gpu_nvml_up":                                     1,
	} {
		if v, ok := testexporter.Value(m, series); !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", series, v, ok, want)
		}
	}
	if _, err := os.Stat(filepath.Join(readOnly, "thermal.csv")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the CSV log was created in a directory nobody may not write (is the exporter root?): %v", err)
	}
	p.Stop(t)
	logs := p.Logs()
	if n := strings.Count(logs, "cannot append to --thermal.csv-file"); n != 1 || !strings.Contains(logs, "permission denied") {
		t.Errorf("the unwritable log was logged %d times, want once with its cause:\n%s", n, logs)
	}
	if strings.Contains(logs, base) {
		t.Errorf("the log names a path:\n%s", logs)
	}
}

// The exporter as nobody on a copy of the Spark /sys: a zone temperature
// and a power cap only root may read (as sysfs makes some attributes
// 0400), and the DMI serials, which are root's on every host and never
// read anyway. It reads the rest and counts the two.
func TestPlatformAsNonRootUser(t *testing.T) {
	base := nobodyDir(t)
	procfs, sysfs := filepath.Join(base, "proc"), filepath.Join(base, "sys")
	for dst, src := range map[string]string{procfs: fixtureDir(t, "spark"), sysfs: sysFixture(t, "spark")} {
		if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
			t.Fatal(err)
		}
		err := filepath.WalkDir(dst, func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			mode := os.FileMode(0o644)
			if d.IsDir() {
				mode = 0o755
			}
			return os.Chmod(path, mode)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"class/thermal/thermal_zone0/temp", "class/hwmon/hwmon1/power11_cap",
		"class/dmi/id/product_serial", "class/dmi/id/board_serial", "class/dmi/id/product_uuid", "class/dmi/id/chassis_serial"} {
		if err := os.Chmod(filepath.Join(sysfs, f), 0o400); err != nil {
			t.Fatal(err)
		}
	}
	p := startAsNobody(t, base, "--path.procfs="+procfs, "--path.sysfs="+sysfs, "--log.level=debug")
	m := boundedGet(t, p, "/metrics?collect[]=platform")
	for series, want := range map[string]float64{
		`spark_scrape_collector_success{collector="platform"}`:                     1,
		"spark_platform_unreadable_files":                                          2,
		`spark_platform_temperature_celsius{sensor="TGPU",source="acpi",zone="5"}`: 41.2,
		`spark_platform_power_limit_watts{limit="syspl1"}`:                         240,
		`spark_platform_power_watts{rail="sys_total"}`:                             25.3,
		`spark_platform_field_supported{field="dmi"}`:                              1,
	} {
		if v, ok := testexporter.Value(m, series); !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", series, v, ok, want)
		}
	}
	for _, absent := range []string{`sensor="TSOC"`, `limit="pl1"`} {
		if strings.Contains(m, absent) {
			t.Errorf("a reading only root may read is exported (%s):\n%s", absent, m)
		}
	}
	p.WaitLog(t, "permission denied")
	p.Stop(t)
	if logs := p.Logs(); strings.Contains(logs, base) {
		t.Errorf("the log names a path:\n%s", logs)
	}
}

// The fabric collector run as nobody on a copy of the healthy Spark's
// tree, its class/ links into devices/ kept as links: the walk through
// them works unprivileged, a counter only root may read is left out (and
// named at debug level, without the mount point), and the collector
// succeeds.
func TestFabricAsNonRootUser(t *testing.T) {
	base := nobodyDir(t)
	procfs, sysfs := filepath.Join(base, "proc"), filepath.Join(base, "sys")
	for dst, src := range map[string]string{procfs: fixtureDir(t, "spark"), sysfs: sysFixture(t, "spark-fabric")} {
		if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
			t.Fatal(err)
		}
		err := filepath.WalkDir(dst, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.Type()&os.ModeSymlink != 0 {
				return err // a link's mode is its target's
			}
			mode := os.FileMode(0o644)
			if d.IsDir() {
				mode = 0o755
			}
			return os.Chmod(path, mode)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if fi, err := os.Lstat(filepath.Join(sysfs, "class/infiniband/rocep1s0f0")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the copy lost the class/ link: %v %v", fi, err)
	}
	const rootOnly = "class/infiniband/rocep1s0f0/ports/1/hw_counters/out_of_sequence"
	if err := os.Chmod(filepath.Join(sysfs, rootOnly), 0o400); err != nil {
		t.Fatal(err)
	}
	p := startAsNobody(t, base, "--path.procfs="+procfs, "--path.sysfs="+sysfs, "--log.level=debug")
	m := boundedGet(t, p, "/metrics?collect[]=fabric")
	for series, want := range map[string]float64{
		`spark_scrape_collector_success{collector="fabric"}`:                                       1,
		`spark_fabric_link_up{device="rocep1s0f0",port="1"}`:                                       1,
		`spark_fabric_pcie_link_width{device="roceP2p1s0f0",which="current"}`:                      4,
		`spark_fabric_roce_events_total{counter="out_of_sequence",device="roceP2p1s0f0",port="1"}`: 0,
	} {
		if v, ok := testexporter.Value(m, series); !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", series, v, ok, want)
		}
	}
	if strings.Contains(m, `counter="out_of_sequence",device="rocep1s0f0"`) {
		t.Errorf("a counter only root may read is exported:\n%s", m)
	}
	p.WaitLog(t, "permission denied")
	p.Stop(t)
	if logs := p.Logs(); strings.Contains(logs, base) || !strings.Contains(logs, rootOnly) {
		t.Errorf("the log names a path, or not the file relative to --path.sysfs:\n%s", logs)
	}
}

// A real procfs mounted with hidepid=1 (invisible=noaccess): other users'
// processes are listed but cannot be read. The exporter, as nobody, counts
// them as unreadable, and the workloads collector still succeeds.
func TestHidepidProcfs(t *testing.T) {
	base := nobodyDir(t)
	procfs := filepath.Join(base, "proc")
	if err := os.Mkdir(procfs, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("proc", procfs, "proc", 0, "hidepid=1"); err != nil {
		t.Skipf("cannot mount a procfs with hidepid here (%v): this row of docs/robustness.md needs root", err)
	}
	t.Cleanup(func() { syscall.Unmount(procfs, syscall.MNT_DETACH) })

	p := startAsNobody(t, base, "--path.procfs="+procfs, "--no-collector.thermal")
	m := boundedGet(t, p, "/metrics")
	if v, _ := testexporter.Value(m, `spark_scrape_collector_success{collector="workloads"}`); v != 1 {
		t.Errorf("workloads collector failed under hidepid:\n%s", m)
	}
	// This test process runs as root: its /proc entry is one nobody cannot
	// read.
	if v, ok := testexporter.Value(m, "spark_workload_unreadable_processes"); !ok || v < 1 {
		t.Errorf("spark_workload_unreadable_processes = %v (present %v), want at least 1 (this test, as root)", v, ok)
	}
	if v, _ := testexporter.Value(m, `spark_scrape_collector_success{collector="pool"}`); v != 1 {
		t.Errorf("pool collector failed on a hidepid procfs:\n%s", m)
	}
}
