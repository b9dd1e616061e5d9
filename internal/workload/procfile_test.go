package workload

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// A kernel 6.8 stat line: 52 fields.
const vllmStat = "2101 (vllm) S 1987 2101 1987 34816 2101 4194560 1840233 0 2101 0 91523 20377 0 0 20 0 61 0 4817734 " +
	"61239107584 5242880 18446744073709551615 187650793357312 187650796240932 281474523285200 0 0 0 0 16781312 " +
	"134234618 0 0 0 17 4 0 0 0 0 0 187650796323872 187650796388424 187651099299840 281474523291333 " +
	"281474523291468 281474523291468 281474523295715 0\n"

func TestParseStat(t *testing.T) {
	// comparable is a stat with its command name as a string.
	type comparable struct {
		PPID      int
		State     byte
		StartTime uint64
		Comm      string
	}
	for _, tc := range []struct {
		name    string
		in      string
		want    comparable
		wantErr error
	}{
		{"vllm server", vllmStat, comparable{PPID: 1987, State: 'S', StartTime: 4817734, Comm: "vllm"}, nil},
		{"comm with spaces and parentheses", "77 (a) b (c)) R 1 77 77 0 -1 4194304 1 0 0 0 0 0 0 0 20 0 1 0 900 0 0\n",
			comparable{PPID: 1, State: 'R', StartTime: 900, Comm: "a) b (c)"}, nil},
		{"renamed engine core", "2140 (VLLM::EngineCor) S 2101 2101 1987 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 40 0 4818950 0 0",
			comparable{PPID: 2101, State: 'S', StartTime: 4818950, Comm: "VLLM::EngineCor"}, nil},
		{"the longest comm the kernel writes, ending in parentheses", "88 (" + strings.Repeat("k", 62) + ")) I 2 0 0 0 -1 69238880 0 0 0 0 0 0 0 0 20 0 1 0 41 0 0\n",
			comparable{PPID: 2, State: 'I', StartTime: 41, Comm: strings.Repeat("k", 62) + ")"}, nil},
		{"zombie", "300 (python3) Z 299 1 1 0 -1 4227084 0 0 0 0 0 0 0 0 20 0 1 0 5000 0 0 0\n",
			comparable{PPID: 299, State: 'Z', StartTime: 5000, Comm: "python3"}, nil},
		{"empty", "", comparable{}, errStatNoComm},
		{"no closing parenthesis", "1 (init S 0", comparable{}, errStatNoComm},
		{"parentheses reversed", "1 )init( S 0", comparable{}, errStatNoComm},
		{"cut before starttime", "1 (init) S 0 1 1 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0", comparable{}, errStatShort},
		{"ppid not a number", "1 (init) S x 1 1 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 7 0", comparable{}, errStatBadField},
		{"negative ppid", "1 (init) S -1 1 1 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 7 0", comparable{}, errStatBadField},
		{"starttime not a number", "1 (init) S 0 1 1 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 7x 0", comparable{}, errStatBadField},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := parseStat([]byte(tc.in))
			got := comparable{s.PPID, s.State, s.StartTime, string(s.Comm)}
			if err != tc.wantErr || got != tc.want {
				t.Errorf("got %+v, %v; want %+v, %v", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestParseVmRSS(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		want    uint64
		wantOK  bool
		wantErr error
	}{
		{"process", "Name:\tvllm\nVmHWM:\t 9437184 kB\nVmRSS:\t 8388608 kB\nRssAnon:\t 7340032 kB\n", 8388608 * 1024, true, nil},
		{"kernel thread: no VmRSS", "Name:\tkworker/0:1\nState:\tI (idle)\nThreads:\t1\n", 0, false, nil},
		{"RssAnon alone is not VmRSS", "RssAnon:\t 12 kB\n", 0, false, nil},
		{"zero", "VmRSS:\t       0 kB\n", 0, true, nil},
		{"no unit", "VmRSS:\t 12\n", 0, false, errStatusRSS},
		{"not a number", "VmRSS:\t lots kB\n", 0, false, errStatusRSS},
		{"overflows bytes", "VmRSS:\t 18446744073709551615 kB\n", 0, false, errStatusRSS},
		{"largest in bytes", "VmRSS:\t 18014398509481983 kB\n", 18014398509481983 * 1024, true, nil},
		{"cut before the unit", "Name:\tvllm\nVmRSS:\t 83886", 0, false, errStatusRSS},
		{"twice", "VmRSS:\t 8 kB\nVmRSS:\t 8 kB\n", 0, false, errStatusRSS},
		{"twice, the second bad", "VmRSS:\t 8 kB\nVmRSS:\t x\n", 0, false, errStatusRSS},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok, err := parseVmRSS([]byte(tc.in))
			if got != tc.want || ok != tc.wantOK || err != tc.wantErr {
				t.Errorf("got %d, %v, %v; want %d, %v, %v", got, ok, err, tc.want, tc.wantOK, tc.wantErr)
			}
		})
	}
}

func TestSplitCmdline(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"vllm\x00serve\x00m\x00", []string{"vllm", "serve", "m"}},
		{"VLLM::EngineCore\x00\x00\x00\x00\x00", []string{"VLLM::EngineCore"}},
		{"python3\x00-c\x00\x00", []string{"python3", "-c"}},
		{"a\x00\x00b\x00", []string{"a", "", "b"}},
		{"", nil},
		{"\x00\x00", nil},
	} {
		if got := splitCmdline([]byte(tc.in)); !slices.Equal(got, tc.want) {
			t.Errorf("%q: got %q, want %q", tc.in, got, tc.want)
		}
	}
}

func FuzzParseStat(f *testing.F) {
	f.Add([]byte(vllmStat))
	f.Add([]byte("1 (a) b (c)) R 1 77 77 0 -1 4194304 1 0 0 0 0 0 0 0 20 0 1 0 900 0 0"))
	f.Add([]byte("1 ()"))
	f.Add([]byte(")("))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := parseStat(data)
		if err != nil {
			if s.PPID != 0 || s.State != 0 || s.StartTime != 0 || s.Comm != nil {
				t.Errorf("error %v with a partial result %+v", err, s)
			}
			return
		}
		if s.PPID < 0 {
			t.Errorf("negative ppid %d", s.PPID)
		}
		if !bytes.Contains(data, []byte("("+string(s.Comm)+")")) {
			t.Errorf("comm %q is not what the parentheses hold", s.Comm)
		}
	})
}

func FuzzParseVmRSS(f *testing.F) {
	f.Add([]byte("Name:\tvllm\nVmRSS:\t 8388608 kB\n"))
	f.Add([]byte("VmRSS:"))
	f.Add([]byte("VmRSS: 1 kB 2"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rss, ok, err := parseVmRSS(data)
		if (err != nil || !ok) && rss != 0 {
			t.Errorf("rss %d without a reading (ok %v, err %v)", rss, ok, err)
		}
		if ok && rss%1024 != 0 {
			t.Errorf("rss %d is not a whole number of kB", rss)
		}
		if ok && !bytes.Contains(data, []byte("VmRSS:")) {
			t.Errorf("a reading from data without VmRSS")
		}
	})
}
