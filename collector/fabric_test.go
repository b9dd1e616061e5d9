package collector

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
	"weak"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/spark-exporter/spark_exporter/internal/collected"
	"github.com/spark-exporter/spark_exporter/internal/fabric"
	"github.com/spark-exporter/spark_exporter/internal/layout"
	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
)

func fabricOn(t *testing.T, root string, logger log.Logger) (map[string]float64, error) {
	t.Helper()
	return collect(t, newFabricCollector(root, logger))
}

func TestFabricOnAHealthySpark(t *testing.T) {
	got, err := fabricOn(t, sysFixture("spark-fabric"), nopLogger())
	if err != nil {
		t.Fatal(err)
	}
	for series, want := range map[string]float64{
		`spark_fabric_info{device="rocep1s0f0",link_layer="Ethernet",netdev="enp1s0f0np0",port="1"}`:     1,
		`spark_fabric_info{device="roceP2p1s0f1",link_layer="Ethernet",netdev="enP2p1s0f1np1",port="1"}`: 1,
		`spark_fabric_link_up{device="rocep1s0f0",port="1"}`:                                             1,
		`spark_fabric_link_up{device="roceP2p1s0f0",port="1"}`:                                           1,
		`spark_fabric_link_up{device="rocep1s0f1",port="1"}`:                                             0,
		`spark_fabric_link_rate_bits_per_second{device="roceP2p1s0f0",port="1"}`:                         200e9,
		`spark_fabric_pcie_link_width{device="rocep1s0f0",which="current"}`:                              4,
		`spark_fabric_pcie_link_width{device="rocep1s0f0",which="max"}`:                                  4,
		`spark_fabric_pcie_link_transfers_per_second{device="roceP2p1s0f1",which="current"}`:             32e9,
		`spark_fabric_receive_bytes_total{device="rocep1s0f0",port="1"}`:                                 4 * 2864127401,
		`spark_fabric_transmit_bytes_total{device="roceP2p1s0f0",port="1"}`:                              4 * 2853312550,
		`spark_fabric_port_errors_total{counter="symbol_error",device="rocep1s0f0",port="1"}`:            0,
		`spark_fabric_roce_events_total{counter="np_cnp_sent",device="rocep1s0f0",port="1"}`:             1842,
		`spark_fabric_field_supported{field="rdma"}`:                                                     1,
		`spark_fabric_field_supported{field="hw_counters"}`:                                              1,
		`spark_fabric_field_supported{field="pcie_link"}`:                                                1,
	} {
		if v, ok := got[series]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", series, v, ok, want)
		}
	}
	// The ports without a cable negotiated nothing: no rate.
	if _, ok := got[`spark_fabric_link_rate_bits_per_second{device="rocep1s0f1",port="1"}`]; ok {
		t.Error("a rate for a port that is down")
	}
	for s := range got {
		if strings.Contains(s, "/") || strings.Contains(s, "0000") {
			t.Errorf("a path in %s", s)
		}
	}
	if n := countSeries(got, "spark_fabric_roce_events_total{"); n != 4*len(fabric.EventCounters) {
		t.Errorf("%d RoCE event series, want %d", n, 4*len(fabric.EventCounters))
	}
}

func countSeries(got map[string]float64, prefix string) int {
	n := 0
	for s := range got {
		if strings.HasPrefix(s, prefix) {
			n++
		}
	}
	return n
}

func TestFabricOnADegradedSpark(t *testing.T) {
	got, err := fabricOn(t, sysFixture("spark-fabric-degraded"), nopLogger())
	if err != nil {
		t.Fatal(err)
	}
	for series, want := range map[string]float64{
		`spark_fabric_link_up{device="roceP2p1s0f0",port="1"}`:                                   0,
		`spark_fabric_pcie_link_width{device="rocep1s0f0",which="current"}`:                      2,
		`spark_fabric_pcie_link_width{device="rocep1s0f0",which="max"}`:                          4,
		`spark_fabric_port_errors_total{counter="link_downed",device="roceP2p1s0f0",port="1"}`:   1,
		`spark_fabric_roce_events_total{counter="out_of_sequence",device="rocep1s0f0",port="1"}`: 17,
	} {
		if v, ok := got[series]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", series, v, ok, want)
		}
	}
}

// Without class/infiniband: the gap said, nothing else, and success.
func TestFabricWithoutRDMA(t *testing.T) {
	for _, root := range []string{sysFixture("spark"), sysFixture("x86-server"), t.TempDir()} {
		got, err := fabricOn(t, root, nopLogger())
		if err != nil {
			t.Fatalf("%s: %v", root, err)
		}
		if len(got) != 1 || got[`spark_fabric_field_supported{field="rdma"}`] != 0 {
			t.Errorf("%s: %v", root, got)
		}
		if _, ok := got[`spark_fabric_field_supported{field="rdma"}`]; !ok {
			t.Errorf("%s: no field_supported{rdma}", root)
		}
	}
}

// An unreadable counter is left out (and named at debug level, relative to
// the mount point), the rest is read.
func TestFabricUnreadableFile(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads a mode 000 file; cmd/spark_exporter's TestFabricAsNonRootUser runs as nobody")
	}
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(sysFixture("spark-fabric"))); err != nil {
		t.Fatal(err)
	}
	name := "class/infiniband/rocep1s0f0/ports/1/counters/symbol_error"
	if err := os.Chmod(filepath.Join(dir, name), 0); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	got, err := fabricOn(t, dir, log.NewLogfmtLogger(&buf))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got[`spark_fabric_port_errors_total{counter="symbol_error",device="rocep1s0f0",port="1"}`]; ok {
		t.Error("an unreadable counter exported")
	}
	if got[`spark_fabric_link_up{device="rocep1s0f0",port="1"}`] != 1 {
		t.Error("the rest of the device lost")
	}
	if !strings.Contains(buf.String(), name) || strings.Contains(buf.String(), dir) {
		t.Errorf("log:\n%s", buf.String())
	}
}

// A scrape reads the values again without listing the devices again; a
// minute later, or at once after a file of the layout has gone, the
// devices are discovered afresh.
func TestFabricRereadsValuesAndRediscovers(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(sysFixture("spark-fabric"))); err != nil {
		t.Fatal(err)
	}
	c := newFabricCollector(dir, nopLogger())
	now := time.Unix(1e9, 0)
	c.now = func() time.Time { return now }
	scrape := func() map[string]float64 {
		t.Helper()
		got, err := collect(t, c)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	write := func(rel, data string) {
		t.Helper()
		// In place, as sysfs changes a value: the same file.
		if err := os.WriteFile(filepath.Join(dir, rel), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const rcv = `spark_fabric_receive_bytes_total{device="rocep1s0f0",port="1"}`
	const up = `spark_fabric_link_up{device="roceP2p1s0f0",port="1"}`
	scrape()
	write("class/infiniband/rocep1s0f0/ports/1/counters/port_rcv_data", "3000000000\n")
	write("class/infiniband/roceP2p1s0f0/ports/1/state", "1: DOWN\n")
	got := scrape()
	if got[rcv] != 12e9 || got[up] != 0 {
		t.Errorf("values not read again: %s = %v, %s = %v", rcv, got[rcv], up, got[up])
	}

	// A new device shows only once the layout is discovered again.
	gone := filepath.Join(dir, "class/infiniband/rocep1s0f1")
	if err := os.Rename(gone, gone+"x"); err != nil {
		t.Fatal(err)
	}
	got = scrape() // the layout's names: the renamed device is not listed
	if _, ok := got[`spark_fabric_link_up{device="rocep1s0f1x",port="1"}`]; ok {
		t.Error("the listing was made again before a minute passed")
	}
	now = now.Add(layout.Every)
	got = scrape()
	if _, ok := got[`spark_fabric_link_up{device="rocep1s0f1x",port="1"}`]; !ok {
		t.Error("a minute later, the device under its new name is not there")
	}

	// A file of the layout that goes makes the next scrape discover.
	if err := os.Remove(filepath.Join(dir, "class/infiniband/roceP2p1s0f1/ports/1/state")); err != nil {
		t.Fatal(err)
	}
	scrape()
	if c.layout.Has() {
		t.Error("a file of the layout went, and the layout is kept")
	}
	if got := scrape(); got[`spark_fabric_field_supported{field="rdma"}`] != 1 || countSeries(got, "spark_fabric_link_up{") != 3 {
		t.Errorf("after rediscovery: %d link_up series", countSeries(got, "spark_fabric_link_up{"))
	}
}

// An attribute whose read blocks (a driver stuck in a firmware command)
// fails the collector at the deadline, naming the file relative to
// --path.sysfs, and the next scrape fails at once while it is still
// blocked; once it returns, the collector reads again.
func TestFabricBlockedRead(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(sysFixture("spark-fabric"))); err != nil {
		t.Fatal(err)
	}
	const state = "class/infiniband/rocep1s0f0/ports/1/state"
	path := filepath.Join(dir, state)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
	c := newFabricCollector(dir, nopLogger())
	_, err := collectWithin(t, c, 50*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), state) || !strings.Contains(err.Error(), "blocked") || strings.Contains(err.Error(), dir) {
		t.Fatalf("a blocked read: %v", err)
	}
	if _, err = collectWithin(t, c, 50*time.Millisecond); err == nil || !strings.Contains(err.Error(), state) || !strings.Contains(err.Error(), "still blocked") {
		t.Fatalf("the next scrape while the read is blocked: %v", err)
	}
	w, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	os.Remove(path)
	if err := os.WriteFile(path, []byte("4: ACTIVE\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var got map[string]float64
	testexporter.Eventually(t, 10*time.Second, func() bool {
		got, err = collect(t, c)
		return err == nil
	}, "a scrape once the blocked read returned")
	if got[`spark_fabric_link_up{device="rocep1s0f0",port="1"}`] != 1 {
		t.Errorf("after the read returned: %v", got)
	}
}

// A host with more RDMA devices than fabric.MaxDevices, one of them with
// more ports than fabric.MaxPorts: the first devices and ports are read,
// the rest counted for spark_scrape_collector_entries_left_out, scrape
// after scrape, and the first of them named at debug level.
func TestFabricCountsWhatItLeavesOut(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, data string) {
		t.Helper()
		path := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	const extraDevices, ports = 3, fabric.MaxPorts + 2
	for i := range fabric.MaxDevices + extraDevices {
		write(fmt.Sprintf("class/infiniband/mlx5_%03d/ports/1/state", i), "4: ACTIVE\n")
	}
	for p := 2; p <= ports; p++ {
		write(fmt.Sprintf("class/infiniband/mlx5_000/ports/%d/state", p), "4: ACTIVE\n")
	}
	var buf bytes.Buffer
	c := newFabricCollector(dir, level.NewFilter(log.NewLogfmtLogger(&buf), level.AllowDebug()))
	for range 2 { // the discovery, then the layout kept
		got, err := collect(t, c)
		if err != nil {
			t.Fatal(err)
		}
		if n := countSeries(got, "spark_fabric_info{"); n != fabric.MaxDevices-1+fabric.MaxPorts {
			t.Errorf("%d ports reported, want %d", n, fabric.MaxDevices-1+fabric.MaxPorts)
		}
		if n, want := c.get(), extraDevices+ports-fabric.MaxPorts; n != want {
			t.Errorf("%d left out, want %d", n, want)
		}
	}
	if !strings.Contains(buf.String(), "first=class/infiniband/mlx5_032") || strings.Contains(buf.String(), dir) {
		t.Errorf("log:\n%s", buf.String())
	}
}

// The status page's traffic is the difference between the collector's
// last two readings: none kept before the first scrape, one after it, the
// latest two after the next, each with when it was made.
func TestFabricKeepsItsLastTwoReadings(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(sysFixture("spark-fabric"))); err != nil {
		t.Fatal(err)
	}
	c := newFabricCollector(dir, nopLogger())
	c.results = &collected.Results{}
	now := time.Unix(1e9, 0)
	c.now = func() time.Time { return now }
	if st := c.results.Parts(); st.Fabric != nil {
		t.Fatalf("a reading before the first scrape: %+v", st.Fabric)
	}
	rcv := func(r collected.FabricReading) float64 {
		t.Helper()
		for _, d := range r.Snapshot.Devices {
			if d.Name == "rocep1s0f0" {
				return *d.Ports[0].ReceiveBytes
			}
		}
		t.Fatal("no rocep1s0f0")
		return 0
	}
	if _, err := collect(t, c); err != nil {
		t.Fatal(err)
	}
	st := c.results.Parts()
	if st.Fabric == nil || st.Fabric.Previous != nil || !st.Fabric.Latest.At.Equal(now) {
		t.Fatalf("after one scrape: %+v", st.Fabric)
	}
	first := rcv(st.Fabric.Latest)
	now = now.Add(15 * time.Second)
	name := filepath.Join(dir, "class/infiniband/rocep1s0f0/ports/1/counters/port_rcv_data")
	if err := os.WriteFile(name, []byte("3000000000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := collect(t, c); err != nil {
		t.Fatal(err)
	}
	st = c.results.Parts()
	if p := st.Fabric.Previous; p == nil || rcv(*p) != first || st.Fabric.Latest.At.Sub(p.At) != 15*time.Second || rcv(st.Fabric.Latest) != 12e9 {
		t.Errorf("after two scrapes: %+v", st.Fabric)
	}
}

// The reading kept as the previous one is a copy, so the readings before
// it are garbage: a chain of every reading would grow without end.
func TestFabricKeepsNoChainOfReadings(t *testing.T) {
	c := newFabricCollector(sysFixture("spark-fabric"), nopLogger())
	if _, err := collect(t, c); err != nil {
		t.Fatal(err)
	}
	first := weak.Make(c.last.Load())
	for range 3 {
		if _, err := collect(t, c); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	if first.Value() != nil {
		t.Error("the first reading is still reachable three scrapes later")
	}
	if st := c.last.Load(); st.Previous == nil {
		t.Error("no previous reading kept")
	}
}

// A data counter of 2^62 words or more is 2^64 bytes or
// more, not a wrapped 0 (a false reset).
func TestFabricDataCountersDoNotWrap(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(sysFixture("spark-fabric"))); err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(dir, "class/infiniband/rocep1s0f0/ports/1/counters/port_xmit_data")
	if err := os.WriteFile(name, []byte("4611686018427387904\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := fabricOn(t, dir, nopLogger())
	if err != nil {
		t.Fatal(err)
	}
	if v := got[`spark_fabric_transmit_bytes_total{device="rocep1s0f0",port="1"}`]; v != 0x1p64 {
		t.Errorf("2^62 words transmitted: %v bytes, want 2^64", v)
	}
}
