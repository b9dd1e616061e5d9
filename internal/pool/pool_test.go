package pool

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/prometheus/procfs"
)

func TestParseMeminfo(t *testing.T) {
	data, err := os.ReadFile("../../testdata/proc/spark/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	m, err := ParseMeminfo(data)
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
		if _, err := ParseMeminfo([]byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.want) {
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
		m, err := ParseMeminfo(data)
		if err != nil {
			return
		}
		if data[len(data)-1] != '\n' {
			t.Fatal("a file without its last line end accepted")
		}
		s, err := FromMeminfo(m)
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
	if s.CMA != nil && (s.CMA.Free > s.CMA.Total || s.CMA.Free > s.Total) {
		t.Fatalf("CMA %+v accepted beyond its area or the pool", *s.CMA)
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
// figure; beyond its area or the pool it is a corrupt read.
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
		{"CmaTotal: 1024 kB\nCmaFree: 2048 kB\n", "CmaFree 2048 kB exceeds CmaTotal 1024 kB"},
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
