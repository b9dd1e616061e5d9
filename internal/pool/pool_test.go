package pool

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
)

// A DGX Spark's /proc/meminfo, as the kernel prints it (abridged).
const sparkMeminfo = `MemTotal:       125027328 kB
MemFree:        21474836 kB
MemAvailable:   58720256 kB
Buffers:          524288 kB
Cached:         38797312 kB
SwapCached:            0 kB
Shmem:           2097152 kB
Mapped:         16777216 kB
KReclaimable:    1572864 kB
SReclaimable:    1572864 kB
HugePages_Total:       0
HugePages_Free:        0
Hugepagesize:       2048 kB
DirectMap1G:    127926272 kB
`

func deref(p *uint64) string {
	if p == nil {
		return "absent"
	}
	return strconv.FormatUint(*p, 10)
}

func TestParseMeminfo(t *testing.T) {
	m, err := ParseMeminfo([]byte(sparkMeminfo))
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		got  *uint64
		want string
	}{
		"MemTotal": {m.MemTotal, "125027328"}, "MemFree": {m.MemFree, "21474836"},
		"MemAvailable": {m.MemAvailable, "58720256"}, "Buffers": {m.Buffers, "524288"},
		"Cached": {m.Cached, "38797312"}, "SReclaimable": {m.SReclaimable, "1572864"},
		"Shmem": {m.Shmem, "2097152"}, "Mapped": {m.Mapped, "16777216"},
		"HugePages_Total": {m.HugePagesTotal, "0"}, "Hugepagesize": {m.Hugepagesize, "2048"},
	} {
		if got := deref(tc.got); got != tc.want {
			t.Errorf("%s = %s, want %s", name, got, tc.want)
		}
	}

	// A kernel without hugetlbfs prints no HugePages lines.
	m, err = ParseMeminfo([]byte("MemTotal: 1 kB\nHugePages_Free: 0\n"))
	if err != nil || m.HugePagesTotal != nil || m.Hugepagesize != nil || deref(m.MemTotal) != "1" {
		t.Errorf("got %+v, %v", m, err)
	}

	for _, bad := range []string{
		"MemTotal: 1 kB\nMemTotal: 2 kB\n",   // repeated
		"MemFree: lots kB\n",                 // not a number
		"MemFree: 12 MB\n",                   // a unit the kernel never prints
		"MemFree:\n",                         // no value
		"MemFree: -1 kB\n",                   // negative
		"MemFree: 18446744073709551616 kB\n", // beyond 64 bits
	} {
		if _, err := ParseMeminfo([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		} else if strings.Contains(err.Error(), "lots") || strings.Contains(err.Error(), "MB") {
			t.Errorf("%q: error %q quotes the file", bad, err)
		}
	}
	// Lines the pool does not use may have any shape.
	if _, err := ParseMeminfo([]byte("Weird line\nActive(anon): x\n\n")); err != nil {
		t.Errorf("unused lines: %v", err)
	}
}

func FuzzParseMeminfo(f *testing.F) {
	f.Add([]byte(sparkMeminfo))
	f.Add([]byte("MemTotal:"))
	f.Add([]byte("MemFree: 1 kB 2"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseMeminfo(data)
		if err != nil {
			if m != (Meminfo{}) {
				t.Errorf("error %v with a partial result", err)
			}
			return
		}
		if m.MemTotal != nil && !bytes.Contains(data, []byte("MemTotal:")) {
			t.Error("MemTotal from data without its line")
		}
		if _, err := FromMeminfo(m); err == nil && m.MemTotal == nil {
			t.Error("a snapshot without MemTotal")
		}
	})
}

func TestParsePressure(t *testing.T) {
	for _, tc := range []struct {
		in         string
		some, full string
	}{
		{"some avg10=1.25 avg60=0.80 avg300=0.30 total=48213000\nfull avg10=0.50 avg60=0.31 avg300=0.10 total=19004000\n",
			"48213000", "19004000"},
		{"some avg10=0.00 avg60=0.00 avg300=0.00 total=7\n", "7", "absent"}, // before 5.0: no full line
		{"", "absent", "absent"},
		{"other total=1\n", "absent", "absent"},
	} {
		p, err := ParsePressure([]byte(tc.in))
		if err != nil || deref(p.Some) != tc.some || deref(p.Full) != tc.full {
			t.Errorf("%q: some %s, full %s, %v; want %s, %s", tc.in, deref(p.Some), deref(p.Full), err, tc.some, tc.full)
		}
	}
	for _, bad := range []string{"some avg10=x\n", "some total=x\n", "full total=\n", "some total=1\nsome total=2\n"} {
		if _, err := ParsePressure([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func FuzzParsePressure(f *testing.F) {
	f.Add([]byte("some avg10=1.25 avg60=0.80 avg300=0.30 total=48213000\nfull avg10=0.50 avg60=0.31 avg300=0.10 total=19004000\n"))
	f.Add([]byte("some total="))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParsePressure(data)
		if err != nil && p != (Pressure{}) {
			t.Errorf("error %v with a partial result", err)
		}
		if p.Full != nil && !bytes.Contains(data, []byte("full")) {
			t.Error("a full total from data without a full line")
		}
	})
}
