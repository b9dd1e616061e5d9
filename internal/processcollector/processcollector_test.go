package processcollector

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"

	"github.com/spark-exporter/spark_exporter/internal/testing/cputime"
)

// gather returns each process_* series' value.
func gather(t testing.TB, c prometheus.Collector) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		m := mf.GetMetric()[0]
		switch mf.GetType() {
		case dto.MetricType_COUNTER:
			got[mf.GetName()] = m.GetCounter().GetValue()
		default:
			got[mf.GetName()] = m.GetGauge().GetValue()
		}
	}
	return got
}

// The series are client_golang's, network pair aside, and agree with it.
func TestSameSeriesAsClientGolang(t *testing.T) {
	ours := gather(t, New())
	theirs := gather(t, collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	delete(theirs, "process_network_receive_bytes_total")
	delete(theirs, "process_network_transmit_bytes_total")
	if len(ours) != len(theirs) {
		t.Errorf("series %v, want %v", ours, theirs)
	}
	for name, want := range theirs {
		got, ok := ours[name]
		if !ok {
			t.Errorf("%s missing", name)
			continue
		}
		var close bool
		switch name {
		case "process_cpu_seconds_total":
			// Read at different moments, and theirs in clock ticks.
			close = got >= want-0.05 && got <= want+0.5
		case "process_resident_memory_bytes", "process_virtual_memory_bytes", "process_open_fds":
			close = got > 0 && got >= want*0.5 && got <= want*2
		default:
			close = got == want
		}
		if !close {
			t.Errorf("%s = %v, client_golang says %v", name, got, want)
		}
	}
}

func TestParseStatm(t *testing.T) {
	for in, want := range map[string][2]uint64{
		"327417 4790 2403 1234 0 38291 0\n": {327417, 4790},
		"1 2":                               {1, 2},
	} {
		size, resident, err := parseStatm([]byte(in))
		if err != nil || size != want[0] || resident != want[1] {
			t.Errorf("%q: %d %d %v, want %v", in, size, resident, err, want)
		}
	}
	for _, in := range []string{"", "1", "x 2", "1 -2", "9007199254740993 1"} {
		if _, _, err := parseStatm([]byte(in)); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}

func FuzzParseStatm(f *testing.F) {
	f.Add([]byte("327417 4790 2403 1234 0 38291 0\n"))
	f.Add([]byte("1"))
	f.Fuzz(func(t *testing.T, data []byte) {
		size, resident, err := parseStatm(data)
		if err != nil && (size != 0 || resident != 0) {
			t.Errorf("error %v with sizes %d %d", err, size, resident)
		}
		if err == nil && !strings.Contains(string(data), strconv.FormatUint(resident, 10)) {
			t.Errorf("resident %d is not in %q", resident, data)
		}
	})
}

// BenchmarkCollect compares this collector with client_golang's, each
// gathered as a scrape gathers it.
func BenchmarkCollect(b *testing.B) {
	for name, c := range map[string]prometheus.Collector{
		"own":           New(),
		"client_golang": collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	} {
		b.Run(name, func(b *testing.B) {
			reg := prometheus.NewRegistry()
			reg.MustRegister(c)
			cputime.Loop(b, func() {
				if _, err := reg.Gather(); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

// The count follows the files opened, on the kernel's count (Linux 6.2
// and later) as on a listing, which counts its own descriptor too.
func TestCountFDs(t *testing.T) {
	before, err := countFDs()
	if err != nil {
		t.Fatal(err)
	}
	listed, err := listFDs()
	if err != nil {
		t.Fatal(err)
	}
	if listed != before && listed != before+1 {
		t.Errorf("listing counts %d, the count says %d", listed, before)
	}
	const extra = 7
	for range extra {
		f, err := os.Open(fdPath)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
	}
	after, err := countFDs()
	if err != nil {
		t.Fatal(err)
	}
	if after != before+extra {
		t.Errorf("%d open files after opening %d more, had %d", after, extra, before)
	}
}
