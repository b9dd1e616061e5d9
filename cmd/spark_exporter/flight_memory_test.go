package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/flight"
	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
)

// fullRing fills a ring of size bytes, every slot, with one boot that
// ended unclean a minute ago (boot id 0xee...).
func fullRing(t testing.TB, file string, size uint64) {
	t.Helper()
	r, err := flight.Open(file, size)
	if err != nil {
		t.Fatal(err)
	}
	slots := (size - 4096) / flight.SlotSize
	end := time.Now().Add(-time.Minute)
	for i := range slots {
		usable := uint64(60<<30) - i%1000<<20
		some := i * 1000
		rec := flight.Record{Time: end.Add(-time.Duration(slots-1-i) * 5 * time.Second), Boot: [16]byte{0xee},
			Pool:     &flight.Pool{Free: usable, Available: usable, Cache: 4 << 30, Usable: &usable},
			Pressure: &flight.Pressure{Some: some, Full: &some},
			GPU:      &flight.GPU{TemperatureCelsius: 60, PowerWatts: 40, SMClockHertz: 2e9, State: "cool"},
			Kernel:   &flight.Kernel{OOMGlobal: i / 50000, Xid: []flight.XidCount{{Code: 79, Count: i / 70000}}},
			Workloads: []flight.Workload{{Role: "inference", Kind: "vllm", ResidentBytes: 40 << 30},
				{Role: "training", Kind: "axolotl", ResidentBytes: 8<<30 + i}}}
		if err := r.Append(rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
}

// peakResident is a process's VmHWM, in bytes.
func peakResident(t *testing.T, pid int) uint64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM")
	return 0
}

// servedPeak starts the exporter, scrapes /metrics and the status API, and
// returns its peak resident memory, how long it took to listen and the
// /metrics it served.
func servedPeak(t *testing.T, args ...string) (uint64, time.Duration, string) {
	t.Helper()
	began := time.Now()
	p := testexporter.Start(t, nil, args...)
	listened := time.Since(began)
	metrics := p.Get(t, "/metrics")
	p.Get(t, "/api/v1/status")
	peak := peakResident(t, p.PID())
	p.Stop(t)
	return peak, listened, metrics
}

// The recorder's memory is what it serves, not the ring's size: with a
// full ring whose one boot ended unclean, the exporter's peak resident
// memory stays within a bound of the same exporter's without the recorder,
// it listens within 5 s, and it still says the previous boot ended
// unclean (the 5 s bound not under an emulator); report --flight on the
// whole boot stays within the same bound of its peak on the smallest ring. 1 GiB (bound 3×) runs
// with SPARK_TEST_FLIGHT_1GIB=1: the ring takes 1 GiB of disk and seconds
// to write.
func TestFlightMemoryBounded(t *testing.T) {
	procfs := flightProcfs(t, "11111111-2222-3333-4444-555555555555")
	base := []string{"--path.procfs=" + procfs, "--path.sysfs=" + sysFixture(t, "spark"), noGPU, noKmsg}
	without, _, _ := servedPeak(t, base...)
	smallest := filepath.Join(t.TempDir(), "flight")
	fullRing(t, smallest, flight.MinSize)
	_, _, _, small := reportFlightOn(t, smallest, "--path.procfs="+procfs, "--boot=-1", "--last=10000h")
	for _, c := range []struct {
		size  uint64
		ratio float64
	}{{64 << 20, 2}, {1 << 30, 3}} {
		t.Run(fmt.Sprintf("%dMiB", c.size>>20), func(t *testing.T) {
			if c.size > 64<<20 && os.Getenv("SPARK_TEST_FLIGHT_1GIB") == "" {
				t.Skip("SPARK_TEST_FLIGHT_1GIB unset")
			}
			file := filepath.Join(t.TempDir(), "flight")
			fullRing(t, file, c.size)
			peak, listened, metrics := servedPeak(t, append(base, "--flight.file="+file, fmt.Sprintf("--flight.size=%dMiB", c.size>>20))...)
			ratio := float64(peak) / float64(without)
			t.Logf("VmHWM %.1f MiB with the recorder, %.1f MiB without: ×%.2f; listening after %v",
				float64(peak)/(1<<20), float64(without)/(1<<20), ratio, listened.Round(time.Millisecond))
			if ratio > c.ratio {
				t.Errorf("peak resident memory ×%.2f the exporter's without the recorder, over ×%g", ratio, c.ratio)
			}
			if listened > 5*time.Second && os.Getenv("SPARK_TEST_EXEC_WRAPPER") == "" {
				t.Errorf("listening after %v, over 5 s", listened)
			}
			if v, ok := testexporter.Value(metrics, "spark_flight_last_boot_unclean"); !ok || v != 1 {
				t.Errorf("spark_flight_last_boot_unclean = %v (%v), want 1", v, ok)
			}
			began := time.Now()
			code, text, stderr, rss := reportFlightOn(t, file, "--path.procfs="+procfs, "--boot=-1", "--last=10000h")
			took := time.Since(began)
			if code != reportMade || !strings.Contains(text, "the previous boot: ") || !strings.Contains(text, "ended without a clean shutdown") {
				t.Fatalf("report of the whole boot: exit %d:\n%s%s", code, text, stderr)
			}
			t.Logf("report --flight of the whole boot: peak %d MiB, %d MiB on the smallest ring; %v", rss, small, took.Round(time.Millisecond))
			if float64(rss) > c.ratio*float64(small) {
				t.Errorf("report --flight of the whole boot: peak %d MiB, over ×%g its %d MiB on the smallest ring", rss, c.ratio, small)
			}
		})
	}
}
