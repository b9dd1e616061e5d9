package pool

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/procfs"
)

func TestParseMeminfo(t *testing.T) {
	data, err := os.ReadFile("../../testdata/proc/spark/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	m, err := parseMeminfo(data)
	if err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string]*uint64{
		"MemTotal": m.MemTotal, "MemFree": m.MemFree, "Mapped": m.Mapped,
		"HugePages_Total": m.HugePagesTotal, "Hugepagesize": m.Hugepagesize,
	} {
		if got == nil {
			t.Errorf("%s missing", name)
		}
	}
	if *m.MemTotal != 125027328 || *m.HugePagesTotal != 0 || *m.Hugepagesize != 2048 {
		t.Errorf("MemTotal %d, HugePages_Total %d, Hugepagesize %d", *m.MemTotal, *m.HugePagesTotal, *m.Hugepagesize)
	}
	if m.Active != nil {
		t.Error("a field the pool does not use was read")
	}
}

func TestParseMeminfoRefuses(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "meminfo: empty"},
		{"MemTotal:       125027328 kB", "truncated"},
		{"MemTotal:       125027328 kB\nMemFree:  21", "truncated"},
		{"MemTotal:       125027328 kB\nMemTotal: 1 kB\n", "MemTotal appears twice"},
		{"MemTotal:       125027328\n", "MemTotal: value is not a number of kB"},
		{"MemTotal:       125027328 MB\n", "MemTotal: value is not a number of kB"},
		{"MemTotal:       125027328 kB extra\n", "MemTotal: value is not a number of kB"},
		{"MemTotal:       -1 kB\n", "MemTotal: value is not a number of kB"},
		{"MemTotal:       18446744073709551616 kB\n", "MemTotal: value is not a number of kB"},
		{"MemTotal:\n", "MemTotal: value is not a number of kB"},
		{"HugePages_Total:       3 kB\n", "HugePages_Total: value is not a number"},
	} {
		if _, err := parseMeminfo([]byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseMeminfo(%q) = %v, want an error containing %q", tc.in, err, tc.want)
		}
	}
}

func TestParsePressure(t *testing.T) {
	for _, tc := range []struct {
		in         string
		some, full string // "" for absent
	}{
		{"some avg10=1.25 avg60=0.80 avg300=0.30 total=48213000\nfull avg10=0.50 avg60=0.31 avg300=0.10 total=19004000\n", "48213000", "19004000"},
		{"some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n", "0", ""},
		{"some avg10=100.00 avg60=0.00 avg300=0.00 total=18446744073709551615\nnew kind of line\n", "18446744073709551615", ""},
	} {
		p, err := ParsePressure([]byte(tc.in))
		if err != nil {
			t.Errorf("ParsePressure(%q): %v", tc.in, err)
			continue
		}
		if show(p.Some) != tc.some || show(p.Full) != tc.full {
			t.Errorf("ParsePressure(%q) = some %s full %s", tc.in, show(p.Some), show(p.Full))
		}
	}
}

func show(v *uint64) string {
	if v == nil {
		return ""
	}
	return fmt.Sprint(*v)
}

func TestParsePressureRefuses(t *testing.T) {
	const some = "some avg10=1.25 avg60=0.80 avg300=0.30 total=48213000\n"
	for _, tc := range []struct{ in, want string }{
		{"", "pressure: empty"},
		{"\n\n", "neither a some nor a full line"},
		{"other avg10=1\n", "neither a some nor a full line"},
		{strings.TrimSuffix(some, "\n"), "truncated"},
		{some + some, "some appears twice"},
		{"some avg10=1.25 avg60=0.80 avg300=0.30\n", "some: want 4 fields, got 3"},
		{"some avg10=1.25 avg60=0.80 avg300=0.30 total=1 extra=2\n", "want 4 fields, got 5"},
		{"some avg60=1.25 avg10=0.80 avg300=0.30 total=1\n", "field 1 is not avg10="},
		{"full avg10=NaN avg60=0.80 avg300=0.30 total=1\n", "full: avg10: not a number in range"},
		{"full avg10=-1 avg60=0.80 avg300=0.30 total=1\n", "avg10: not a number in range"},
		{"some avg10=1.25 avg60=0.80 avg300=0.30 total=18446744073709551616\n", "total: not a number in range"},
		{"some avg10=1.25 avg60=0.80 avg300=0.30 total=0x10\n", "total: not a number in range"},
	} {
		if _, err := ParsePressure([]byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParsePressure(%q) = %v, want an error containing %q", tc.in, err, tc.want)
		}
	}
}

// FuzzParseMeminfo: no input panics; what is accepted gives a snapshot or
// an error, and a snapshot's figures hold together.
func FuzzParseMeminfo(f *testing.F) {
	if data, err := os.ReadFile("../../testdata/proc/spark/meminfo"); err == nil {
		f.Add(data)
	}
	f.Add([]byte("MemTotal: 1 kB\nMemFree: 2 kB\n"))
	if data, err := os.ReadFile("../../testdata/proc/serving-kill/meminfo"); err == nil {
		f.Add(data)
	}
	f.Add([]byte("MemTotal: 18446744073709551615 kB\nHugePages_Total: 9\nHugepagesize: 1048576 kB\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := parseMeminfo(data)
		if err != nil {
			return
		}
		if data[len(data)-1] != '\n' {
			t.Fatal("a file without its last line end accepted")
		}
		s, err := fromMeminfo(m)
		if err != nil {
			return
		}
		checkSnapshot(t, m, s)
	})
}

// checkSnapshot asserts the relations between a snapshot's figures.
func checkSnapshot(t *testing.T, m procfs.Meminfo, s Snapshot) {
	t.Helper()
	if s.Total != *m.MemTotal*1024 || s.Free != *m.MemFree*1024 || s.Mapped != *m.Mapped*1024 {
		t.Fatalf("snapshot %+v does not match meminfo", s)
	}
	if s.Flushable > s.PageCache {
		t.Fatalf("flushable %d above the page cache %d", s.Flushable, s.PageCache)
	}
	if s.HeadroomAfterFlush(0) < s.Headroom(0) || s.Headroom(1<<40) > s.Headroom(0) {
		t.Fatalf("headroom arithmetic wrapped: %+v", s)
	}
	if s.Usable() > s.Available {
		t.Fatalf("usable %d above MemAvailable %d", s.Usable(), s.Available)
	}
	if s.CMA != nil && s.CMA.Free > s.Total {
		t.Fatalf("CMA %+v accepted beyond the pool", *s.CMA)
	}
	if s.CMA != nil && s.CMA.AccountingInvalid() != (s.CMA.Free > s.CMA.Total) {
		t.Fatalf("CMA %+v: accounting invalid %v", *s.CMA, s.CMA.AccountingInvalid())
	}
}

func FuzzParsePressure(f *testing.F) {
	f.Add([]byte("some avg10=1.25 avg60=0.80 avg300=0.30 total=48213000\nfull avg10=0.50 avg60=0.31 avg300=0.10 total=19004000\n"))
	f.Add([]byte("some avg10=0 avg60=0 avg300=0 total=0\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParsePressure(data)
		if err != nil {
			return
		}
		if p.Some == nil && p.Full == nil {
			t.Fatal("accepted without a some or full line")
		}
		if data[len(data)-1] != '\n' {
			t.Fatal("a file without its last line end accepted")
		}
	})
}

// The two meminfo states a vLLM Spark's owner published (testdata/proc
// serving-idle and serving-kill, README there): usable is MemAvailable −
// CmaFree to the kB, and the planning figures leave free CMA out too.
func TestUsableOnServingFixtures(t *testing.T) {
	const gib = 1 << 30
	for _, tc := range []struct {
		tree                        string
		available, cmaFree, memFree uint64 // kB, as the fixture has them
	}{
		{"serving-idle", 27525120, 136315, 912261},
		{"serving-kill", 10957619, 9237955, 11513364},
	} {
		s, err := Read("../../testdata/proc/" + tc.tree)
		if err != nil {
			t.Fatalf("%s: %v", tc.tree, err)
		}
		if s.CMA == nil || s.CMA.Free != tc.cmaFree*1024 {
			t.Fatalf("%s: CMA %+v, want CmaFree %d kB", tc.tree, s.CMA, tc.cmaFree)
		}
		if want := (tc.available - tc.cmaFree) * 1024; s.Usable() != want {
			t.Errorf("%s: usable %d, want MemAvailable − CmaFree = %d", tc.tree, s.Usable(), want)
		}
		if want := int64(tc.memFree-tc.cmaFree)*1024 - 4*gib; s.Headroom(4*gib) != want {
			t.Errorf("%s: headroom %d, want MemFree − CmaFree − reserve = %d", tc.tree, s.Headroom(4*gib), want)
		}
		if want := s.Headroom(4*gib) + int64(s.Flushable); s.HeadroomAfterFlush(4*gib) != want {
			t.Errorf("%s: headroom after flush %d, want %d", tc.tree, s.HeadroomAfterFlush(4*gib), want)
		}
	}
}

const meminfoHead = "MemTotal: 1048576 kB\nMemFree: 262144 kB\nMemAvailable: 524288 kB\n" +
	"Buffers: 0 kB\nCached: 0 kB\nSReclaimable: 0 kB\nShmem: 0 kB\nMapped: 0 kB\n"

// A kernel without CMA: usable is MemAvailable and the CMA part is nil.
func TestUsableWithoutCMA(t *testing.T) {
	s, err := Parse([]byte(meminfoHead))
	if err != nil {
		t.Fatal(err)
	}
	if s.CMA != nil || s.Usable() != s.Available || s.Headroom(0) != int64(s.Free) {
		t.Errorf("without CMA lines: CMA %+v, usable %d, headroom %d; want nil, %d, %d", s.CMA, s.Usable(), s.Headroom(0), s.Available, s.Free)
	}
}

// Free CMA beyond MemAvailable leaves nothing usable, never a wrapped
// figure; beyond the pool it is a corrupt read.
func TestCMABadInput(t *testing.T) {
	s, err := Parse([]byte(meminfoHead + "CmaTotal: 1048576 kB\nCmaFree: 786432 kB\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Usable() != 0 {
		t.Errorf("CmaFree above MemAvailable: usable %d, want 0", s.Usable())
	}
	if h := s.Headroom(0); h != (262144-786432)*1024 {
		t.Errorf("headroom %d, want MemFree − CmaFree, negative", h)
	}
	for _, tc := range []struct{ cma, want string }{
		{"CmaTotal: 4194304 kB\nCmaFree: 2097152 kB\n", "CmaFree 2097152 kB exceeds MemTotal 1048576 kB"},
		{"CmaTotal: 1024 kB\n", "CmaTotal without CmaFree"},
		{"CmaFree: 0 kB\n", "CmaFree without CmaTotal"},
		{"CmaTotal: 1024 kB\nCmaFree: 12\n", "CmaFree: value is not a number of kB"},
		{"CmaTotal: 1024 kB\nCmaFree: 12 kB\nCmaFree: 12 kB\n", "CmaFree appears twice"},
	} {
		if _, err := Parse([]byte(meminfoHead + tc.cma)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(…%q) = %v, want an error containing %q", tc.cma, err, tc.want)
		}
	}
}

// Kernel 7.0.0-1019's CMA accounting: CmaTotal 0 beside CmaFree 940604 kB.
// It is flagged, and the free CMA is still left out of what is usable.
func TestCMAAccountingInvalid(t *testing.T) {
	s, err := Read("../../testdata/proc/cma-anomaly")
	if err != nil {
		t.Fatal(err)
	}
	if s.CMA == nil || !s.CMA.AccountingInvalid() || s.CMA.Total != 0 || s.CMA.Free != 940604*1024 {
		t.Fatalf("CMA %+v: want CmaTotal 0, CmaFree 940604 kB, flagged", s.CMA)
	}
	if want := s.Available - s.CMA.Free; s.Usable() != want {
		t.Errorf("usable %d, want MemAvailable − CmaFree = %d", s.Usable(), want)
	}
	healthy, err := Read("../../testdata/proc/serving-idle")
	if err != nil || healthy.CMA.AccountingInvalid() {
		t.Errorf("a healthy kernel's CMA %+v flagged (%v)", healthy.CMA, err)
	}
}

func TestParseBuddyinfo(t *testing.T) {
	data, err := os.ReadFile("../../testdata/proc/fragmented/buddyinfo")
	if err != nil {
		t.Fatal(err)
	}
	zones, err := ParseBuddyinfo(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(zones) != 2 || zones[1].Node != "0" || zones[1].Name != "Normal" || len(zones[1].Free) != 14 {
		t.Fatalf("zones %+v: want DMA and Normal of node 0, 14 orders", zones)
	}
	if n := zones[1].Free; n[12] != 27 || n[13] != 0 || n[0] != 60000 {
		t.Errorf("Normal %v: want 60000 at order 0, 27 at 12, 0 at 13", n)
	}
	// A kernel of MAX_PAGE_ORDER 10 prints 11 orders; an older one, whose
	// MAX_ORDER 11 was exclusive, the same.
	zones, err = ParseBuddyinfo([]byte("Node 1, zone    DMA32      6      1      3      6      4      5      3      4      3      1    416 \n"))
	if err != nil || len(zones) != 1 || zones[0].Node != "1" || len(zones[0].Free) != 11 || zones[0].Free[10] != 416 {
		t.Errorf("11 orders: %+v, %v", zones, err)
	}
}

func TestParseBuddyinfoRefuses(t *testing.T) {
	const line = "Node 0, zone   Normal      1      2      3 \n"
	for _, tc := range []struct{ in, want string }{
		{"", "buddyinfo: empty"},
		{strings.TrimSuffix(line, "\n"), "truncated"},
		{line + line, "node 0 zone Normal appears twice"},
		{line + "Node 0, zone      DMA      1      2 \n", "has 2 orders, the first line 3"},
		{"Node 0 zone Normal 1 2 3\n", "the node is not a number followed by a comma"},
		{"Node 0, zone Normal\n", `not "Node N, zone NAME"`},
		{"Node x, zone Normal 1\n", "the node is not a number"},
		{"Node -1, zone Normal 1\n", "the node is not a number"},
		{"Node 0, zone Nor\"mal 1\n", "not a kernel zone name"},
		{"Node 0, zone Normal 1 NaN\n", "order 1: not a count"},
		{"Node 0, zone Normal 1 0x10\n", "order 1: not a count"},
		{"Node 0, zone Normal 1 1e3\n", "order 1: not a count"},
		{"Node 0, zone Normal 18446744073709551616\n", "order 0: not a count"},
		{"Node 0, zone Normal" + strings.Repeat(" 1", 33) + "\n", "more than 32 orders"},
		{"\n", `not "Node N, zone NAME"`},
	} {
		if _, err := ParseBuddyinfo([]byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseBuddyinfo(%q) = %v, want an error containing %q", tc.in, err, tc.want)
		}
	}
}

// The free bytes in blocks of 32 MiB or more, by page size: the published
// fragmented rank has none, the fresh one 782 blocks of 32 MiB; with 64 KiB
// pages orders 9 and up count; a kernel whose largest block is 4 MiB, or an
// unknown page size, cannot be judged.
func TestLargeFreeBytes(t *testing.T) {
	zones := func(tree string) []Zone {
		data, err := os.ReadFile("../../testdata/proc/" + tree + "/buddyinfo")
		if err != nil {
			t.Fatal(err)
		}
		z, err := ParseBuddyinfo(data)
		if err != nil {
			t.Fatal(err)
		}
		return z
	}
	max10 := []Zone{{Node: "0", Name: "Normal", Free: []uint64{9, 8, 7, 6, 5, 4, 3, 2, 1, 1, 416}}}
	const mib = 1 << 20
	for _, tc := range []struct {
		name     string
		zones    []Zone
		pageSize uint64
		want     float64
		ok       bool
	}{
		{"fragmented", zones("fragmented"), 4096, 0, true},
		{"fresh", zones("fresh"), 4096, 782 * 32 * mib, true},
		{"fresh on 64 KiB pages", zones("fresh"), 65536, (1400*32 + 3600*64 + 3400*128 + 1417*256 + 782*512 + 1*32 + 1*64 + 1*128 + 1*256) * mib, true},
		{"largest block 4 MiB", max10, 4096, 0, false},
		{"page size unknown", zones("fresh"), 0, 0, false},
	} {
		got, ok := LargeFreeBytes(tc.zones, tc.pageSize, 32*mib)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: %g, %v; want %g, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

// The rate over the window, fed every 5 s as the status page refreshes:
// none until a sample is a Step old, then the counter's pace, with no more
// than Span/Step + 1 samples kept; a reset starts afresh.
func TestRateWindow(t *testing.T) {
	w := RateWindow{Span: 5 * time.Minute, Step: 10 * time.Second}
	t0 := time.Date(2026, 8, 1, 0, 0, 0, 0, time.UTC)
	if _, ok := w.Add(t0, 100); ok {
		t.Error("a rate from one sample")
	}
	if _, ok := w.Add(t0.Add(5*time.Second), 110); ok {
		t.Error("a rate over 5 s, under the Step")
	}
	for i := 2; i <= 240; i++ {
		rate, ok := w.Add(t0.Add(time.Duration(i)*5*time.Second), uint64(100+10*i))
		if !ok || rate != 2 {
			t.Fatalf("sample %d: %g, %v; want 2 a second", i, rate, ok)
		}
		if len(w.samples) > 31 {
			t.Fatalf("sample %d: %d samples kept", i, len(w.samples))
		}
	}
	if _, ok := w.Add(t0.Add(21*time.Minute), 5); ok {
		t.Error("a rate across a counter reset")
	}
}

func TestParseKernelPageSize(t *testing.T) {
	for in, want := range map[string]uint64{
		"a-b r-xp 0 0 0 /x\nSize: 8 kB\nKernelPageSize:        4 kB\nMMUPageSize:  4 kB\n": 4096,
		"KernelPageSize:       64 kB\nKernelPageSize:     2048 kB\n":                       65536,
	} {
		if got, err := ParseKernelPageSize([]byte(in)); err != nil || got != want {
			t.Errorf("ParseKernelPageSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		"":                              "no KernelPageSize line",
		"KernelPageSize:        4 kB":   "not a number of kB",
		"KernelPageSize:        4 MB\n": "not a number of kB",
		"KernelPageSize:        6 kB\n": "not a power of two",
		"KernelPageSize:        2 kB\n": "not a power of two",
		"KernelPageSize:     4096 kB\n": "not a power of two",
		"KernelPageSize:       -4 kB\n": "not a power of two",
	} {
		if _, err := ParseKernelPageSize([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseKernelPageSize(%q) = %v, want an error containing %q", in, err, want)
		}
	}
}

// FuzzParseBuddyinfo: no input panics; what is accepted has one order count
// per order on every line, unique zones, and names fit for a label.
func FuzzParseBuddyinfo(f *testing.F) {
	for _, tree := range []string{"fragmented", "fresh", "spark"} {
		if data, err := os.ReadFile("../../testdata/proc/" + tree + "/buddyinfo"); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte("Node 0, zone Normal 1\nNode 0, zone Normal 1\n"))
	f.Add([]byte("Node 18446744073709551616, zone DMA 1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		zones, err := ParseBuddyinfo(data)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, z := range zones {
			if len(z.Free) != len(zones[0].Free) || len(z.Free) == 0 || len(z.Free) > maxOrders {
				t.Fatalf("zone %+v beside %d orders", z, len(zones[0].Free))
			}
			if seen[z.Node+" "+z.Name] || !zoneName([]byte(z.Name)) || strconv.Quote(z.Node) != `"`+z.Node+`"` {
				t.Fatalf("zone %+v repeated or badly named", z)
			}
			seen[z.Node+" "+z.Name] = true
		}
	})
}
