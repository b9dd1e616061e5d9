package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/flight"
	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
)

// flightProcfs is the Spark fixture /proc with a boot id, for a recorder
// that tells boots apart.
func flightProcfs(t *testing.T, bootID string) string {
	procfs := t.TempDir()
	if err := os.CopyFS(procfs, os.DirFS(fixtureDir(t, "spark"))); err != nil {
		t.Fatal(err)
	}
	setBootID(t, procfs, bootID)
	return procfs
}

func setBootID(t *testing.T, procfs, id string) {
	dir := filepath.Join(procfs, "sys", "kernel", "random")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "boot_id"), []byte(id+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The recorder on the built binary, killed with SIGKILL mid-run (as a
// wedge or a power cut ends it): every record it completed reads back,
// numbered without a gap; after a "reboot" (a new boot id) the next
// exporter says the previous boot ended unclean, the report gives its last
// minutes, and a second exporter on the same file refuses to start.
func TestFlightSurvivesSIGKILL(t *testing.T) {
	procfs := flightProcfs(t, "11111111-2222-3333-4444-555555555555")
	file := filepath.Join(t.TempDir(), "flight")
	args := []string{"--path.procfs=" + procfs, "--path.sysfs=" + sysFixture(t, "spark"), noGPU,
		kmsgFixture(t, "spark.kmsg"), "--flight.file=" + file, "--flight.interval=100ms", "--flight.size=1MiB"}
	p := testexporter.Start(t, nil, args...)
	testexporter.Eventually(t, 60*time.Second, func() bool {
		v, ok := testexporter.Value(p.Get(t, "/metrics"), "spark_flight_records_total")
		return ok && v >= 20
	}, "20 flight records")
	if err := syscall.Kill(p.PID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.Stop(t)

	recs, damaged, err := flight.Read(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) < 20 || damaged > 1 {
		t.Fatalf("%d records read back, %d damaged; want at least 20 and at most the one cut", len(recs), damaged)
	}
	for i, r := range recs {
		if r.N != recs[0].N+uint64(i) {
			t.Fatalf("record %d is number %d after %d: a record was lost", i, r.N, recs[0].N)
		}
		if r.Clean || r.Pool == nil || r.Pool.Usable == nil || r.Kernel == nil || r.Kernel.DriverOutOfMemory != 2 {
			t.Fatalf("record %d: clean %v, pool %v, kernel %+v", i, r.Clean, r.Pool, r.Kernel)
		}
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("flight file mode %v (%v), want 0640", fi.Mode().Perm(), err)
	}

	// The next boot.
	setBootID(t, procfs, "66666666-7777-8888-9999-000000000000")
	p = testexporter.Start(t, nil, args...)
	metrics := p.Get(t, "/metrics")
	if v, ok := testexporter.Value(metrics, "spark_flight_last_boot_unclean"); !ok || v != 1 {
		t.Errorf("spark_flight_last_boot_unclean = %v (%v), want 1", v, ok)
	}
	var model struct {
		Flight *struct {
			Unclean bool   `json:"unclean"`
			EndedAt string `json:"ended_at"`
			Verdict string `json:"verdict"`
		} `json:"flight"`
	}
	if err := json.Unmarshal([]byte(p.Get(t, "/api/v1/status")), &model); err != nil {
		t.Fatal(err)
	}
	if model.Flight == nil || !model.Flight.Unclean || !strings.Contains(model.Flight.Verdict, "nothing recorded after") {
		t.Errorf("/api/v1/status flight: %+v", model.Flight)
	}
	if page := p.Get(t, "/"); !strings.Contains(page, "previous boot ended without a clean shutdown") {
		t.Error("the status page does not name the unclean previous boot")
	}

	if out, err := testexporter.Command(t, "status", "--url="+p.URL).CombinedOutput(); err != nil ||
		!strings.Contains(string(out), "previous boot ended without a clean shutdown") {
		t.Errorf("status: %v\n%s", err, out)
	}

	second := testexporter.Command(t, append(args, "--web.listen-address=127.0.0.1:0")...)
	out, err := second.CombinedOutput()
	if code := exitCode(err); code != 1 || !strings.Contains(string(out), "another process") || strings.Contains(string(out), file) {
		t.Errorf("a second exporter on the file: exit %d, output\n%s", code, out)
	}

	// The report, by default on the previous boot since it ended unclean.
	cmd := testexporter.Command(t, "--path.procfs="+procfs, "report", "--flight", file)
	text, err := cmd.Output()
	if err != nil {
		t.Fatalf("report --flight: %v\n%s", err, text)
	}
	for _, want := range []string{"the previous boot", "ended without a clean shutdown", "Verdict: ", "nothing recorded after", "Usable memory: "} {
		if !strings.Contains(string(text), want) {
			t.Errorf("report does not say %q:\n%s", want, text)
		}
	}
	var js struct {
		Boot    int    `json:"boot"`
		Records int    `json:"records"`
		Verdict string `json:"verdict"`
	}
	cmd = testexporter.Command(t, "--path.procfs="+procfs, "report", "--flight", file, "--json", "--svg", filepath.Join(t.TempDir(), "f.svg"))
	out, err = cmd.Output()
	if err != nil || json.Unmarshal(out, &js) != nil || js.Boot != -1 || js.Records < 20 || js.Verdict == "" {
		t.Errorf("report --flight --json: %v, %+v\n%s", err, js, out)
	}
	p.Stop(t)
}

// The kernel collector on the built binary follows its log: a FIFO here,
// written after the start as the kernel writes /dev/kmsg. The replayed
// records count at start, a new line counts once it is written.
func TestKernelLogFollowedByBinary(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "kmsg")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	w, err := os.OpenFile(fifo, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	replay, err := os.ReadFile(filepath.Join(testexporter.Root(t), "testdata", "kmsg", "nvrm-no-memory.kmsg"))
	if err != nil {
		t.Fatal(err)
	}
	w.Write(replay)
	p := testexporter.Start(t, nil, "--path.procfs="+fixtureDir(t, "spark"), "--path.sysfs="+sysFixture(t, "spark"), noGPU,
		"--kernel.kmsg-path="+fifo)
	metrics := p.Get(t, "/metrics?collect[]=kernel")
	if v, ok := testexporter.Value(metrics, "spark_kernel_gpu_driver_out_of_memory_total"); !ok || v != 2 {
		t.Errorf("driver out of memory %v (%v) at start, want the 2 replayed", v, ok)
	}
	w.WriteString("4,9001,99000000,-;NVRM: Xid (PCI:000f:01:00): 79, pid=1234, name=python3, GPU has fallen off the bus.\n")
	testexporter.Eventually(t, 30*time.Second, func() bool {
		v, ok := testexporter.Value(p.Get(t, "/metrics?collect[]=kernel"), `spark_kernel_gpu_xid_errors_total{xid="79"}`)
		return ok && v == 1
	}, "Xid 79 written to the log counted")
	if logs := p.Logs(); strings.Contains(logs, fifo) {
		t.Errorf("the log names the kmsg path:\n%s", logs)
	}
}

// A flight file on a full disk: the ring cannot be allocated, the recorder
// stops with its error counted, and every collector and the scrape go on.
// The ring is allocated whole when opened, so a disk that fills up later
// never fails a record.
func TestFlightOnAFullDisk(t *testing.T) {
	dir := t.TempDir()
	mountTmpfs(t, dir, "size=64k")
	fillUp(t, dir)
	p := testexporter.Start(t, nil, "--path.procfs="+fixtureDir(t, "spark"), "--path.sysfs="+sysFixture(t, "spark"), noGPU,
		noKmsg, "--flight.file="+filepath.Join(dir, "flight"))
	m := p.Get(t, "/metrics")
	for series, want := range map[string]float64{
		"spark_flight_write_errors_total": 1, "spark_flight_records_total": 0,
		`spark_scrape_collector_success{collector="flight"}`: 1, `spark_scrape_collector_success{collector="pool"}`: 1,
	} {
		if v, ok := testexporter.Value(m, series); !ok || v != want {
			t.Errorf("%s = %v (%v), want %v", series, v, ok, want)
		}
	}
	if logs := p.Logs(); !strings.Contains(logs, "no space left on device") || strings.Contains(logs, dir) {
		t.Errorf("the log does not say why, or names the path:\n%s", logs)
	}
}

// With nobody scraping, the records follow the pool: a MemFree changed
// after the start-up collection reaches the ring.
func TestFlightRecordsFollowThePoolUnscraped(t *testing.T) {
	procfs := flightProcfs(t, "11111111-2222-3333-4444-555555555555")
	file := filepath.Join(t.TempDir(), "flight")
	p := testexporter.Start(t, nil, "--path.procfs="+procfs, "--path.sysfs="+sysFixture(t, "spark"), noGPU,
		kmsgFixture(t, "spark.kmsg"), "--flight.file="+file, "--flight.interval=100ms", "--flight.size=1MiB")
	defer p.Stop(t)
	meminfo := filepath.Join(procfs, "meminfo")
	data, err := os.ReadFile(meminfo)
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(string(data), "MemFree:         21474836 kB", "MemFree:         12345678 kB", 1)
	if changed == string(data) {
		t.Fatal("the fixture has no such MemFree line")
	}
	next := meminfo + ".new"
	if err := os.WriteFile(next, []byte(changed), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(next, meminfo); err != nil {
		t.Fatal(err)
	}
	testexporter.Eventually(t, 30*time.Second, func() bool {
		recs, _, err := flight.Read(file)
		return err == nil && len(recs) > 0 && recs[len(recs)-1].Pool != nil && recs[len(recs)-1].Pool.Free == 12345678<<10
	}, "a record of the changed MemFree")
}
