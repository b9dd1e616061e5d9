package collector

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/spark-exporter/spark_exporter/internal/collected"
	"github.com/spark-exporter/spark_exporter/internal/hostfs"
	"github.com/spark-exporter/spark_exporter/internal/judge"
	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
)

const gib = 1 << 30

func TestPoolOnSparkFixture(t *testing.T) {
	c, err := newPoolCollector(hostfs.New(fixtures), 4*gib, nopLogger())
	if err != nil {
		t.Fatal(err)
	}
	got, err := collect(t, c)
	if err != nil {
		t.Fatal(err)
	}

	// From testdata/proc/spark/meminfo, in kB.
	const (
		memTotal     = 125027328
		memFree      = 21474836
		memAvailable = 58720256
		buffers      = 524288
		cached       = 38797312
		sreclaimable = 1572864
		shmem        = 2097152
		mapped       = 16777216
		reserve      = 4 * gib
	)
	// flushable = max(0, 524288 + 38797312 - 2097152 - 16777216) + 1572864
	//           = 20447232 + 1572864 = 22020096 kB
	const flushableKB = 22020096
	if buffers+cached-shmem-mapped+sreclaimable != flushableKB {
		t.Fatal("the arithmetic above is wrong")
	}
	want := map[string]float64{
		"spark_pool_total_bytes":     memTotal * 1024, // 128,027,983,872
		"spark_pool_free_bytes":      memFree * 1024,  // 21,990,232,064
		"spark_pool_available_bytes": memAvailable * 1024,
		// CmaTotal and CmaFree 0: usable is MemAvailable.
		"spark_pool_usable_bytes":    memAvailable * 1024,
		"spark_pool_cma_total_bytes": 0,
		"spark_pool_cma_free_bytes":  0,
		// buff/cache = 524288 + 38797312 + 1572864 = 40894464 kB
		"spark_pool_page_cache_bytes": 40894464 * 1024,
		"spark_pool_flushable_bytes":  flushableKB * 1024, // 22,548,578,304
		"spark_pool_mapped_bytes":     mapped * 1024,
		"spark_pool_hugepages_bytes":  0, // HugePages_Total: 0
		"spark_pool_reserve_bytes":    reserve,
		// 21,990,232,064 - 4,294,967,296
		"spark_pool_headroom_bytes": 17695264768,
		// 21,990,232,064 + 22,548,578,304 - 4,294,967,296
		"spark_pool_headroom_after_flush_bytes": 40243843072,
		// PSI totals are µs: 48213000 µs = 48.213 s
		`spark_pool_pressure_stall_seconds_total{kind="some"}`: 48.213,
		`spark_pool_pressure_stall_seconds_total{kind="full"}`: 19.004,
		"spark_pool_major_faults_total":                        184467,
		`spark_pool_refaults_total{type="anon"}`:               1204,
		`spark_pool_refaults_total{type="file"}`:               389112,
		`spark_pool_reclaimed_pages_total{by="kswapd"}`:        2621440,
		`spark_pool_reclaimed_pages_total{by="direct"}`:        131072,
		"spark_pool_allocation_stalls_total":                   37 + 5, // allocstall_normal + allocstall_movable
		"spark_pool_oom_kills_total":                           1,
	}
	for _, f := range []string{"psi", "major_faults", "refaults", "reclaimed_pages", "allocation_stalls", "oom_kills", "hugepages", "cma",
		"compaction", "buddyinfo", "page_size"} {
		want[`spark_pool_field_supported{field="`+f+`"}`] = 1
	}
	want["spark_pool_cma_accounting_invalid"] = 0
	want["spark_pool_compaction_stalls_total"] = 0
	want["spark_pool_compaction_failures_total"] = 0
	// testdata/proc/spark/buddyinfo, orders 0-13; self/smaps: 4 kB pages.
	blocks := map[string][]float64{
		"DMA":    {3, 2, 1, 2, 1, 1, 2, 1, 1, 1, 1, 1, 1, 0},
		"Normal": {366362, 20000, 15000, 12000, 9000, 6000, 4000, 2500, 1500, 800, 300, 120, 100, 260},
	}
	for zone, counts := range blocks {
		for order, n := range counts {
			want[fmt.Sprintf(`spark_pool_free_blocks{node="0",order="%d",zone="%s"}`, order, zone)] = n
			want[fmt.Sprintf(`spark_pool_block_size_bytes{order="%d"}`, order)] = float64(uint64(4096) << order)
		}
	}
	want["spark_pool_page_size_bytes"] = 4096
	compare(t, got, want)
}

func TestPoolOnOldKernel(t *testing.T) {
	c, err := newPoolCollector(hostfs.New("../testdata/proc/oldkernel"), 4*gib, nopLogger())
	if err != nil {
		t.Fatal(err)
	}
	got, err := collect(t, c)
	if err != nil {
		t.Fatal(err)
	}
	// No PSI, no oom_kill, no hugetlbfs: absent series, supported 0.
	for _, absent := range []string{
		`spark_pool_pressure_stall_seconds_total{kind="some"}`,
		`spark_pool_pressure_stall_seconds_total{kind="full"}`,
		"spark_pool_oom_kills_total",
		"spark_pool_hugepages_bytes",
		// Before 5.9 only file pages had refault tracking.
		`spark_pool_refaults_total{type="anon"}`,
	} {
		if _, ok := got[absent]; ok {
			t.Errorf("%s exported on a kernel that lacks it", absent)
		}
	}
	for field, want := range map[string]float64{"psi": 0, "oom_kills": 0, "hugepages": 0, "refaults": 1, "allocation_stalls": 1} {
		if v := got[`spark_pool_field_supported{field="`+field+`"}`]; v != want {
			t.Errorf("field_supported{%s} = %v, want %v", field, v, want)
		}
	}
	// MemFree 2097152 kB = 2 GiB, below the 4 GiB reserve.
	if v := got["spark_pool_headroom_bytes"]; v != -2*gib {
		t.Errorf("headroom = %v, want %v", v, -2*gib)
	}
	if v := got[`spark_pool_refaults_total{type="file"}`]; v != 77001 {
		t.Errorf("file refaults = %v, want 77001 (workingset_refault)", v)
	}
}

// The meminfo a vLLM Spark's owner published at a healthy serving idle and
// at a global OOM kill (testdata/proc/serving-*/README.md): usable is
// MemAvailable − CmaFree to the byte, and it is the figure that falls into
// the kill while free memory rises.
func TestPoolOnServingFixtures(t *testing.T) {
	usable := map[string]float64{}
	free := map[string]float64{}
	for _, tc := range []struct {
		tree                        string
		available, cmaFree, memFree float64 // kB, from the fixture
	}{
		{"serving-idle", 27525120, 136315, 912261},
		{"serving-kill", 10957619, 9237955, 11513364},
	} {
		c, err := newPoolCollector(hostfs.New("../testdata/proc/"+tc.tree), 4*gib, nopLogger())
		if err != nil {
			t.Fatal(err)
		}
		got, err := collect(t, c)
		if err != nil {
			t.Fatalf("%s: %v", tc.tree, err)
		}
		for name, want := range map[string]float64{
			"spark_pool_usable_bytes":                 (tc.available - tc.cmaFree) * 1024,
			"spark_pool_cma_free_bytes":               tc.cmaFree * 1024,
			"spark_pool_cma_total_bytes":              10485760 * 1024, // assumed, README
			"spark_pool_headroom_bytes":               (tc.memFree-tc.cmaFree)*1024 - 4*gib,
			`spark_pool_field_supported{field="cma"}`: 1,
		} {
			if got[name] != want {
				t.Errorf("%s: %s = %v, want %v", tc.tree, name, got[name], want)
			}
		}
		usable[tc.tree], free[tc.tree] = got["spark_pool_usable_bytes"], got["spark_pool_free_bytes"]
	}
	if !(usable["serving-kill"] < 2*gib && usable["serving-idle"] > 26*gib && free["serving-kill"] > free["serving-idle"]) {
		t.Errorf("usable %v → %v, free %v → %v: want usable to fall into the kill (26.12 → 1.64 GiB) while free rises", usable["serving-idle"], usable["serving-kill"], free["serving-idle"], free["serving-kill"])
	}
}

// The ranks of a GB10 cluster one owner published (testdata/proc/fragmented
// and fresh, README there): after a week of serving, no free block of
// 32 MiB (order 13 with 4 KiB pages) and 27 of 16 MiB, compaction stalled
// 2.7 million times and failed 1.35 million; freshly rebooted, 782 and 1,417.
func TestPoolOnFragmentedFixtures(t *testing.T) {
	for _, tc := range []struct {
		tree             string
		order12, order13 float64
		stalls, failures float64
	}{
		{"fragmented", 27, 0, 2700000, 1350000},
		{"fresh", 1417, 782, 0, 0},
	} {
		got, err := collect(t, mustPool(t, "../testdata/proc/"+tc.tree))
		if err != nil {
			t.Fatalf("%s: %v", tc.tree, err)
		}
		compareSome(t, tc.tree, got, map[string]float64{
			`spark_pool_free_blocks{node="0",order="12",zone="Normal"}`: tc.order12,
			`spark_pool_free_blocks{node="0",order="13",zone="Normal"}`: tc.order13,
			`spark_pool_block_size_bytes{order="12"}`:                   16 << 20,
			`spark_pool_block_size_bytes{order="13"}`:                   32 << 20,
			"spark_pool_page_size_bytes":                                4096,
			"spark_pool_compaction_stalls_total":                        tc.stalls,
			"spark_pool_compaction_failures_total":                      tc.failures,
		})
		if a := got["spark_pool_available_bytes"]; a < 100*gib {
			t.Errorf("%s: MemAvailable %.2f GiB: both ranks had plenty", tc.tree, a/gib)
		}
	}
}

// A 64 KiB-page kernel, as the fixture's smaps states it: a block of 32
// MiB is order 9, and every block size follows the page size.
func TestPoolOn64KiBPages(t *testing.T) {
	dir := testexporter.CopyTree(t, "../testdata/proc/fresh")
	if err := replaceIn(filepath.Join(dir, "self", "smaps"), "KernelPageSize:        4 kB", "KernelPageSize:       64 kB"); err != nil {
		t.Fatal(err)
	}
	got, err := collect(t, mustPool(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	compareSome(t, "64 KiB pages", got, map[string]float64{
		"spark_pool_page_size_bytes":             65536,
		`spark_pool_block_size_bytes{order="0"}`: 65536,
		`spark_pool_block_size_bytes{order="9"}`: 32 << 20,
	})
}

// The page size is the kernel's: read once, not at every scrape.
func TestPoolPageSizeReadOnce(t *testing.T) {
	dir := testexporter.CopyTree(t, fixtures)
	c := mustPool(t, dir)
	if _, err := collect(t, c); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "self", "smaps"), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := collect(t, c)
	if err != nil || got["spark_pool_page_size_bytes"] != 4096 {
		t.Errorf("second scrape: page size %v, error %v; want 4096 as first read", got["spark_pool_page_size_bytes"], err)
	}
}

// Kernel 7.0.0-1019 prints CmaTotal 0 beside 940604 kB of CmaFree
// (testdata/proc/cma-anomaly): the collector flags it and still reports,
// and no figure goes negative or wraps.
func TestPoolCMAAccountingAnomaly(t *testing.T) {
	got, err := collect(t, mustPool(t, "../testdata/proc/cma-anomaly"))
	if err != nil {
		t.Fatalf("the kernel's CMA accounting failed the collector: %v", err)
	}
	const cmaFree = 940604 * 1024
	compareSome(t, "cma-anomaly", got, map[string]float64{
		"spark_pool_cma_accounting_invalid":       1,
		"spark_pool_cma_total_bytes":              0,
		"spark_pool_cma_free_bytes":               cmaFree,
		`spark_pool_field_supported{field="cma"}`: 1,
		"spark_pool_usable_bytes":                 got["spark_pool_available_bytes"] - cmaFree,
	})
	for name, v := range got {
		if v < 0 && name != "spark_pool_headroom_bytes" && name != "spark_pool_headroom_after_flush_bytes" {
			t.Errorf("%s = %v, negative", name, v)
		}
		if v > 1<<60 {
			t.Errorf("%s = %v, a wrapped figure", name, v)
		}
	}
	if got["spark_pool_headroom_bytes"] <= 0 {
		t.Errorf("headroom %v with 88 GiB free", got["spark_pool_headroom_bytes"])
	}
}

func mustPool(t *testing.T, dir string) *poolCollector {
	t.Helper()
	c, err := newPoolCollector(hostfs.New(dir), 4*gib, nopLogger())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// compareSome checks the series named in want and no other.
func compareSome(t *testing.T, what string, got, want map[string]float64) {
	t.Helper()
	for name, w := range want {
		if g, ok := got[name]; !ok || g != w {
			t.Errorf("%s: %s = %v (present %v), want %v", what, name, g, ok, w)
		}
	}
}

// A kernel built without CMA prints neither line: usable is MemAvailable,
// the CMA series are absent and the field is unsupported.
func TestPoolWithoutCMA(t *testing.T) {
	dir := testexporter.CopyTree(t, fixtures)
	for _, line := range []string{"CmaTotal:               0 kB\n", "CmaFree:                0 kB\n"} {
		if err := replaceIn(filepath.Join(dir, "meminfo"), line, ""); err != nil {
			t.Fatal(err)
		}
	}
	c, err := newPoolCollector(hostfs.New(dir), 4*gib, nopLogger())
	if err != nil {
		t.Fatal(err)
	}
	got, err := collect(t, c)
	if err != nil {
		t.Fatal(err)
	}
	for _, absent := range []string{"spark_pool_cma_total_bytes", "spark_pool_cma_free_bytes"} {
		if _, ok := got[absent]; ok {
			t.Errorf("%s exported without CMA lines", absent)
		}
	}
	if got[`spark_pool_field_supported{field="cma"}`] != 0 || got["spark_pool_usable_bytes"] != got["spark_pool_available_bytes"] {
		t.Errorf("cma supported %v, usable %v, available %v: want 0 and usable = available",
			got[`spark_pool_field_supported{field="cma"}`], got["spark_pool_usable_bytes"], got["spark_pool_available_bytes"])
	}
}

func TestPoolBadInput(t *testing.T) {
	for _, tc := range []struct {
		name    string
		damage  func(dir string) error
		wantErr string // empty: the collector succeeds
	}{
		{"meminfo missing", func(d string) error { return os.Remove(filepath.Join(d, "meminfo")) }, "meminfo"},
		{"meminfo empty", func(d string) error { return os.WriteFile(filepath.Join(d, "meminfo"), nil, 0o644) }, "meminfo: empty"},
		{"meminfo truncated at a line end", func(d string) error {
			return truncateAt(filepath.Join(d, "meminfo"), "SReclaimable:")
		}, "SReclaimable missing"},
		{"meminfo truncated mid-line", func(d string) error {
			return truncateAt(filepath.Join(d, "meminfo"), "laimable:     1572864") // leaves "...\nSRec"
		}, "meminfo: truncated"},
		{"meminfo truncated mid-number", func(d string) error {
			// Everything is there, but the last size is cut short: a
			// parser that took it would export a wrong figure.
			return truncateAt(filepath.Join(d, "meminfo"), "48 kB\nHugetlb:") // leaves "Hugepagesize:        20"
		}, "meminfo: truncated"},
		{"meminfo size without its unit", func(d string) error {
			return replaceIn(filepath.Join(d, "meminfo"), "Mapped:          16777216 kB", "Mapped:          16777216")
		}, "meminfo: Mapped: value is not a number of kB"},
		{"meminfo duplicate key", func(d string) error {
			return appendTo(filepath.Join(d, "meminfo"), "MemFree:        99999999 kB\n")
		}, "meminfo: MemFree appears twice"},
		{"meminfo value beyond 2^64", func(d string) error {
			return replaceIn(filepath.Join(d, "meminfo"), "MemFree:         21474836 kB", "MemFree:         18446744073709551616 kB")
		}, "meminfo: MemFree: value is not a number of kB"},
		{"meminfo hexadecimal value", func(d string) error {
			return replaceIn(filepath.Join(d, "meminfo"), "MemFree:         21474836 kB", "MemFree:         0x147AE14 kB")
		}, "meminfo: MemFree: value is not a number of kB"},
		{"meminfo unknown and odd lines skipped", func(d string) error {
			return appendTo(filepath.Join(d, "meminfo"), "NewKernelField:   12 MB\n\nno colon here\n")
		}, ""},
		{"meminfo garbage", func(d string) error {
			return os.WriteFile(filepath.Join(d, "meminfo"), []byte("\x00\x01garbage\n"), 0o644)
		}, "meminfo"},
		{"meminfo value at 2^64", func(d string) error {
			return replaceIn(filepath.Join(d, "meminfo"), "MemTotal:       125027328 kB", "MemTotal:       18446744073709551615 kB")
		}, "MemTotal value 18446744073709551615 kB out of range"},
		{"meminfo CmaFree above MemAvailable: usable 0", func(d string) error {
			return replaceIn(filepath.Join(d, "meminfo"), "CmaTotal:               0 kB\nCmaFree:                0 kB",
				"CmaTotal:        62914560 kB\nCmaFree:         62914560 kB") // 60 GiB, MemAvailable 56 GiB
		}, ""},
		{"meminfo CmaFree above CmaTotal: flagged, not failed", func(d string) error {
			return replaceIn(filepath.Join(d, "meminfo"), "CmaFree:                0 kB", "CmaFree:             1024 kB")
		}, ""},
		{"meminfo CmaFree above MemTotal", func(d string) error {
			return replaceIn(filepath.Join(d, "meminfo"), "CmaTotal:               0 kB\nCmaFree:                0 kB",
				"CmaTotal:       268435456 kB\nCmaFree:        268435456 kB")
		}, "CmaFree 268435456 kB exceeds MemTotal 125027328 kB"},
		{"buddyinfo missing: free blocks absent, not failed", func(d string) error {
			return os.Remove(filepath.Join(d, "buddyinfo"))
		}, ""},
		{"buddyinfo empty", func(d string) error { return os.WriteFile(filepath.Join(d, "buddyinfo"), nil, 0o644) }, "buddyinfo: empty"},
		{"buddyinfo truncated mid-number", func(d string) error {
			return truncateAt(filepath.Join(d, "buddyinfo"), "60 \n") // leaves "…    2"
		}, "buddyinfo: truncated"},
		{"buddyinfo zone twice", func(d string) error {
			return appendTo(filepath.Join(d, "buddyinfo"), "Node 0, zone   Normal      1      1      1      1      1      1      1      1      1      1      1      1      1      1 \n")
		}, "node 0 zone Normal appears twice"},
		{"buddyinfo count not a number", func(d string) error {
			return replaceIn(filepath.Join(d, "buddyinfo"), " 366362 ", "    NaN ")
		}, "order 0: not a count"},
		{"buddyinfo negative count", func(d string) error {
			return replaceIn(filepath.Join(d, "buddyinfo"), " 366362 ", "     -1 ")
		}, "order 0: not a count"},
		{"buddyinfo a line with fewer orders", func(d string) error {
			return replaceIn(filepath.Join(d, "buddyinfo"), "    100    260 \n", "    100 \n")
		}, "has 13 orders, the first line 14"},
		{"buddyinfo zone name not a kernel name", func(d string) error {
			return replaceIn(filepath.Join(d, "buddyinfo"), "zone   Normal", "zone Nor{mal}")
		}, "not a kernel zone name"},
		{"buddyinfo unreadable (a directory)", func(d string) error {
			path := filepath.Join(d, "buddyinfo")
			if err := os.Remove(path); err != nil {
				return err
			}
			return os.Mkdir(path, 0o755)
		}, "reading buddyinfo"},
		{"smaps missing: page size absent, not failed", func(d string) error {
			return os.Remove(filepath.Join(d, "self", "smaps"))
		}, ""},
		{"smaps page size not a power of two", func(d string) error {
			return replaceIn(filepath.Join(d, "self", "smaps"), "KernelPageSize:        4 kB", "KernelPageSize:       12 kB")
		}, "KernelPageSize is not a power of two"},
		{"smaps page size without its unit", func(d string) error {
			return replaceIn(filepath.Join(d, "self", "smaps"), "KernelPageSize:        4 kB", "KernelPageSize:        4")
		}, "KernelPageSize is not a number of kB"},
		{"vmstat missing", func(d string) error { return os.Remove(filepath.Join(d, "vmstat")) }, "vmstat"},
		{"vmstat duplicate key", func(d string) error {
			return appendTo(filepath.Join(d, "vmstat"), "oom_kill 7\n")
		}, "oom_kill appears twice"},
		{"vmstat garbled counter", func(d string) error {
			return replaceIn(filepath.Join(d, "vmstat"), "oom_kill 1", "oom_kill 1x")
		}, "oom_kill: value is not a counter"},
		{"vmstat truncated mid-number", func(d string) error {
			return appendTo(filepath.Join(d, "vmstat"), "pgmajfault_extra 12") // no line end
		}, "vmstat: truncated"},
		{"vmstat value at 2^64-1", func(d string) error {
			return replaceIn(filepath.Join(d, "vmstat"), "oom_kill 1\n", "oom_kill 18446744073709551615\n")
		}, ""},
		{"vmstat value at 2^64", func(d string) error {
			return replaceIn(filepath.Join(d, "vmstat"), "oom_kill 1\n", "oom_kill 18446744073709551616\n")
		}, "oom_kill: value is not a counter"},
		{"vmstat zone counters summing beyond 2^64", func(d string) error {
			return replaceIn(filepath.Join(d, "vmstat"), "allocstall_normal 37\n", "allocstall_normal 18446744073709551615\n")
		}, "sum overflows 64 bits"},
		{"vmstat empty: counters absent, not failed", func(d string) error {
			return os.WriteFile(filepath.Join(d, "vmstat"), nil, 0o644)
		}, ""},
		{"psi absent: old kernel, not a failure", func(d string) error { return os.RemoveAll(filepath.Join(d, "pressure")) }, ""},
		{"psi garbage", func(d string) error {
			return os.WriteFile(filepath.Join(d, "pressure", "memory"), []byte("some avg10=x\n"), 0o644)
		}, "pressure: some: want 4 fields"},
		{"psi empty", func(d string) error {
			return os.WriteFile(filepath.Join(d, "pressure", "memory"), nil, 0o644)
		}, "pressure: empty"},
		{"psi truncated mid-number", func(d string) error {
			return truncateAt(filepath.Join(d, "pressure", "memory"), "04000\n") // leaves "…total=190"
		}, "pressure: truncated"},
		{"psi duplicate line", func(d string) error {
			return appendTo(filepath.Join(d, "pressure", "memory"), "some avg10=0.00 avg60=0.00 avg300=0.00 total=1\n")
		}, "pressure: some appears twice"},
		{"psi total beyond 2^64", func(d string) error {
			return replaceIn(filepath.Join(d, "pressure", "memory"), "total=48213000", "total=18446744073709551616")
		}, "pressure: some: total: not a number"},
		{"psi total at 2^64-1", func(d string) error {
			return replaceIn(filepath.Join(d, "pressure", "memory"), "total=48213000", "total=18446744073709551615")
		}, ""},
		{"psi without a full line (older kernels)", func(d string) error {
			return truncateAt(filepath.Join(d, "pressure", "memory"), "full ")
		}, ""},
		{"psi unreadable (a directory)", func(d string) error {
			psi := filepath.Join(d, "pressure", "memory")
			if err := os.Remove(psi); err != nil {
				return err
			}
			return os.Mkdir(psi, 0o755)
		}, "reading memory pressure"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := testexporter.CopyTree(t, fixtures)
			if err := tc.damage(dir); err != nil {
				t.Fatal(err)
			}
			c, err := newPoolCollector(hostfs.New(dir), 4*gib, nopLogger())
			if err != nil {
				t.Fatal(err)
			}
			got, err := collect(t, c)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
			}
			if len(got) != 0 {
				t.Errorf("a failed read still sent %d series", len(got))
			}
		})
	}
}

func truncateAt(path, marker string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	i := strings.Index(string(data), marker)
	if i < 0 {
		return os.ErrNotExist
	}
	return os.WriteFile(path, data[:i], 0o644)
}

func replaceIn(path, old, new string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if !strings.Contains(string(data), old) {
		return os.ErrNotExist
	}
	return os.WriteFile(path, []byte(strings.Replace(string(data), old, new, 1)), 0o644)
}

func appendTo(path, text string) error {
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteString(text)
	return err
}

func compare(t *testing.T, got, want map[string]float64) {
	t.Helper()
	for name, w := range want {
		g, ok := got[name]
		if !ok {
			t.Errorf("%s missing", name)
		} else if g != w {
			t.Errorf("%s = %v, want %v", name, g, w)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("unexpected series %s", name)
		}
	}
}

// FuzzPoolCollector runs the pool collector's whole read path on arbitrary
// meminfo, vmstat and PSI files: it must never panic, and either fail
// sending nothing or send finite figures that hold together.
func FuzzPoolCollector(f *testing.F) {
	read := func(name string) []byte {
		data, err := os.ReadFile(filepath.Join(fixtures, name))
		if err != nil {
			f.Fatal(err)
		}
		return data
	}
	f.Add(read("meminfo"), read("vmstat"), read("pressure/memory"))
	f.Add(read("meminfo"), []byte{}, []byte("some avg10=0 avg60=0 avg300=0 total=18446744073709551615\n"))
	f.Add([]byte("MemTotal: 1 kB\n"), []byte("oom_kill 1"), []byte("full"))
	// One directory for every input: a fuzzing process runs its inputs
	// one at a time.
	dir := f.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "pressure"), 0o755); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, meminfo, vmstat, psi []byte) {
		for name, data := range map[string][]byte{"meminfo": meminfo, "vmstat": vmstat, "pressure/memory": psi} {
			if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		c, err := newPoolCollector(hostfs.New(dir), 4*gib, nopLogger())
		if err != nil {
			t.Fatal(err)
		}
		got, err := collect(t, c)
		if err != nil {
			if len(got) != 0 {
				t.Fatalf("failed (%v) after sending %d series", err, len(got))
			}
			return
		}
		for name, v := range got {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatalf("%s = %v", name, v)
			}
			if strings.HasPrefix(name, "spark_pool_field_supported") && v != 0 && v != 1 {
				t.Fatalf("%s = %v", name, v)
			}
			if strings.Contains(name, "_total") && v < 0 {
				t.Fatalf("counter %s = %v", name, v)
			}
		}
		if h, free, cma := got["spark_pool_headroom_bytes"], got["spark_pool_free_bytes"], got["spark_pool_cma_free_bytes"]; h != free-cma-4*gib {
			t.Fatalf("headroom %v with free %v, free CMA %v and a 4GiB reserve", h, free, cma)
		}
		if u := got["spark_pool_usable_bytes"]; u < 0 || u > got["spark_pool_available_bytes"] {
			t.Fatalf("usable %v outside 0..MemAvailable %v", u, got["spark_pool_available_bytes"])
		}
		if got["spark_pool_flushable_bytes"] > got["spark_pool_page_cache_bytes"] {
			t.Fatal("more flushable than page cache")
		}
	})
}

// --pool.reserve defaults to judge.DefaultReserveBytes, and reads GB as
// 10^9 bytes and GiB as 2^30.
func TestPoolReserveFlag(t *testing.T) {
	for args, want := range map[string]uint64{"": judge.DefaultReserveBytes, "--pool.reserve=4GB": 4e9, "--pool.reserve=6GiB": 6 * gib} {
		app := kingpin.New("t", "")
		settings := AddPoolFlags(app)
		if _, err := app.Parse(strings.Fields(args)); err != nil {
			t.Fatal(err)
		}
		if got := settings.Reserve(); got != want {
			t.Errorf("%q: reserve %d, want %d", args, got, want)
		}
	}
	app := kingpin.New("t", "")
	AddFlags(app)
	if _, err := app.Parse([]string{"--pool.reserve=4G"}); err == nil || !strings.Contains(err.Error(), "--pool.reserve") || !strings.Contains(err.Error(), "ambiguous") {
		t.Errorf("--pool.reserve=4G: %v, want an ambiguous unit refused naming the flag", err)
	}
}

// What the pool collector hands the status page on the fragmented rank: no
// free byte in blocks of 32 MiB, and compact_fail's rate once a minute has
// passed (2 a second: 120 more); the fresh rank's 782 blocks of 32 MiB.
func TestPoolPublishesFragmentation(t *testing.T) {
	dir := testexporter.CopyTree(t, "../testdata/proc/fragmented")
	c := mustPool(t, dir)
	c.results = &collected.Results{}
	at := time.Date(2026, 8, 1, 0, 0, 0, 0, time.UTC)
	c.now = func() time.Time { return at }
	if _, err := collect(t, c); err != nil {
		t.Fatal(err)
	}
	st := c.results.Parts()
	if p := st.Pool; p == nil || p.LargeFreeBytes == nil || *p.LargeFreeBytes != 0 || p.CompactionFailuresPerSecond != nil {
		t.Fatalf("first run: %+v; want 0 large free bytes and no rate yet", p)
	}
	if err := replaceIn(filepath.Join(dir, "vmstat"), "compact_fail 1350000\n", "compact_fail 1350120\n"); err != nil {
		t.Fatal(err)
	}
	at = at.Add(time.Minute)
	if _, err := collect(t, c); err != nil {
		t.Fatal(err)
	}
	st = c.results.Parts()
	if r := st.Pool.CompactionFailuresPerSecond; r == nil || *r != 2 {
		t.Errorf("a minute later: rate %v, want 2 a second", r)
	}
	fresh := mustPool(t, "../testdata/proc/fresh")
	fresh.results = &collected.Results{}
	if _, err := collect(t, fresh); err != nil {
		t.Fatal(err)
	}
	st = fresh.results.Parts()
	if l := st.Pool.LargeFreeBytes; l == nil || *l != 782*32<<20 {
		t.Errorf("fresh rank: large free bytes %v, want 782 blocks of 32 MiB", l)
	}
}
