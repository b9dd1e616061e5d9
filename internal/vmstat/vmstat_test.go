package vmstat

import (
	"fmt"
	"strings"
	"testing"
)

func u(v uint64) *uint64 { return &v }

func eq(a, b *uint64) bool { return (a == nil && b == nil) || (a != nil && b != nil && *a == *b) }

func same(a, b Counters) bool {
	return eq(a.MajorFaults, b.MajorFaults) && eq(a.RefaultsAnon, b.RefaultsAnon) &&
		eq(a.RefaultsFile, b.RefaultsFile) && eq(a.ReclaimedKswapd, b.ReclaimedKswapd) &&
		eq(a.ReclaimedDirect, b.ReclaimedDirect) && eq(a.AllocStalls, b.AllocStalls) &&
		eq(a.OOMKills, b.OOMKills) && eq(a.CompactStalls, b.CompactStalls) && eq(a.CompactFails, b.CompactFails)
}

func show(c Counters) string {
	f := func(p *uint64) string {
		if p == nil {
			return "absent"
		}
		return fmt.Sprint(*p)
	}
	return fmt.Sprintf("majfault=%s refault_anon=%s refault_file=%s kswapd=%s direct=%s allocstall=%s oom=%s compact_stall=%s compact_fail=%s",
		f(c.MajorFaults), f(c.RefaultsAnon), f(c.RefaultsFile), f(c.ReclaimedKswapd),
		f(c.ReclaimedDirect), f(c.AllocStalls), f(c.OOMKills), f(c.CompactStalls), f(c.CompactFails))
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want Counters
	}{
		{
			name: "kernel 6.x",
			in: "nr_free_pages 123\npgmajfault 4500\nworkingset_refault_anon 10\nworkingset_refault_file 20\n" +
				"pgsteal_kswapd 300\npgsteal_direct 40\npgsteal_khugepaged 9\nallocstall_dma 1\nallocstall_dma32 0\n" +
				"allocstall_normal 5\nallocstall_movable 2\nallocstall_device 0\noom_kill 1\n" +
				"compact_migrate_scanned 9\ncompact_stall 2700000\ncompact_fail 1350000\ncompact_success 1350000\n",
			want: Counters{MajorFaults: u(4500), RefaultsAnon: u(10), RefaultsFile: u(20),
				ReclaimedKswapd: u(300), ReclaimedDirect: u(40), AllocStalls: u(8), OOMKills: u(1),
				CompactStalls: u(2700000), CompactFails: u(1350000)},
		},
		{
			name: "kernel 4.4: per-zone pgsteal, one refault counter, no oom_kill",
			in: "pgmajfault 7\nworkingset_refault 11\npgsteal_kswapd_dma 1\npgsteal_kswapd_dma32 2\n" +
				"pgsteal_kswapd_normal 3\npgsteal_direct_normal 4\nallocstall 5\n",
			want: Counters{MajorFaults: u(7), RefaultsFile: u(11), ReclaimedKswapd: u(6),
				ReclaimedDirect: u(4), AllocStalls: u(5)},
		},
		{
			name: "unknown and odd lines are skipped",
			in:   "\n\nsomething new 1 2 3\nnr_zspages x\n   \noom_kill 3\nfoo\n",
			want: Counters{OOMKills: u(3)},
		},
		{
			name: "largest counter",
			in:   "pgmajfault 18446744073709551615\n",
			want: Counters{MajorFaults: u(18446744073709551615)},
		},
		{name: "empty file", in: "", want: Counters{}},
	} {
		got, err := Parse([]byte(tc.in))
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if !same(got, tc.want) {
			t.Errorf("%s:\n got  %s\n want %s", tc.name, show(got), show(tc.want))
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"oom_kill 1\noom_kill 2\n", "oom_kill appears twice"},
		{"pgmajfault 18446744073709551616\n", "pgmajfault: value is not a counter"},
		{"pgmajfault -1\n", "pgmajfault: value is not a counter"},
		{"pgmajfault\n", "pgmajfault: value is not a counter"},
		{"pgmajfault 1 2\n", "pgmajfault: value is not a counter"},
		{"pgmajfault 12abc\n", "pgmajfault: value is not a counter"},
		{"allocstall_dma 18446744073709551615\nallocstall_normal 1\n", "allocstall_normal: sum overflows"},
		// The kernel writes whole lines: "oom_kill 2" may be "oom_kill 25" cut short.
		{"oom_kill 2", "vmstat: truncated"},
		{"pgmajfault 1\noom_kill", "vmstat: truncated"},
		{"compact_fail 1\ncompact_fail 1\n", "compact_fail appears twice"},
		{"compact_stall 0x10\n", "compact_stall: value is not a counter"},
	} {
		_, err := Parse([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want error containing %q", tc.in, err, tc.want)
		}
	}
}

// FuzzParse checks that no input panics, and that every counter the parser
// accepts reads back the value written for it.
func FuzzParse(f *testing.F) {
	f.Add([]byte("pgmajfault 1\noom_kill 2\n"), uint64(5))
	f.Add([]byte("workingset_refault 9\npgsteal_kswapd_normal 3\n"), uint64(0))
	f.Add([]byte("\x00\xff oom_kill\n\n"), uint64(1<<63))
	f.Add([]byte("compact_stall 2700000\ncompact_fail 1350000\n"), uint64(1))
	f.Fuzz(func(t *testing.T, data []byte, v uint64) {
		c, err := Parse(data)
		if err != nil {
			return
		}
		// Appending one more known counter to a valid file that lacks it
		// must yield exactly that value.
		if c.OOMKills == nil {
			in := append(append([]byte{}, data...), []byte(fmt.Sprintf("\noom_kill %d\n", v))...)
			c2, err := Parse(in)
			if err != nil {
				t.Fatalf("adding oom_kill to valid input failed: %v", err)
			}
			if c2.OOMKills == nil || *c2.OOMKills != v {
				t.Fatalf("oom_kill %d read back as %s", v, show(c2))
			}
		}
	})
}

func BenchmarkParse(b *testing.B) {
	data := []byte(strings.Repeat("nr_something 12345\n", 170) + "pgmajfault 4500\noom_kill 1\n")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(data); err != nil {
			b.Fatal(err)
		}
	}
}
