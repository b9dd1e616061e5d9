package report

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/judge"
	"github.com/spark-exporter/spark_exporter/internal/thermallog"
)

func TestListingKeepsTheFirstTheLastAndTheLongest(t *testing.T) {
	start := time.Date(2025, 11, 24, 14, 0, 0, 0, time.UTC)
	long := map[int]time.Duration{3: 5 * time.Minute, 40: 9 * time.Minute, 41: time.Minute, 500: 7 * time.Minute}
	for _, n := range []int{0, 1, 2, maxListed, 1000} {
		l := spanListing()
		for i := 0; i < n; i++ {
			at := start.Add(time.Duration(i) * time.Hour)
			l.add(Span{Start: at, End: at.Add(time.Second + long[i])})
		}
		kept, leftOut := l.list()
		if len(kept) != min(n, maxListed) || leftOut != n-len(kept) {
			t.Fatalf("%d added: %d kept, %d left out", n, len(kept), leftOut)
		}
		for i := 1; i < len(kept); i++ {
			if !kept[i].Start.After(kept[i-1].Start) {
				t.Errorf("%d added: not in time order: %v", n, kept)
			}
		}
		if n < 1000 {
			continue
		}
		want := []int{0, 1, 2, 3, 4, 5, 40, 41, 500, 999}
		for i, k := range kept {
			if at := start.Add(time.Duration(want[i]) * time.Hour); !k.Start.Equal(at) {
				t.Errorf("kept %d: the stretch at %v, want the one at %v (%v)", i, k.Start, at, kept)
			}
		}
	}
}

// flapping is a log's rows a second apart, the thermal slowdown flag
// flapping every two rows.
func flapping(n int) (thermallog.Trace, RowSource) {
	meta := thermallog.Trace{Format: thermallog.FormatCSV, Columns: []string{"clocks_event_reasons", "clocks.sm", "power.draw", "temperature.gpu", "timestamp", "utilization.gpu"}}
	start := time.Date(2025, 11, 24, 14, 0, 0, 0, time.UTC)
	temp, power, util, clock := 80.0, 95.0, 0.97, 2400e6
	on, off := uint64(0x20), uint64(0)
	return meta, func(yield func(thermallog.Row)) error {
		for i := 0; i < n; i++ {
			reasons := &off
			if (i/2)%2 == 1 {
				reasons = &on
			}
			yield(thermallog.Row{Time: start.Add(time.Duration(i) * time.Second), Temperature: &temp, Power: &power,
				Utilization: &util, SMClock: &clock, Reasons: reasons, Line: i + 2})
		}
		return nil
	}
}

func flappingConfig() judge.ThermalConfig {
	cfg := judge.DefaultThermalConfig()
	cfg.Window = 30 * time.Second
	return cfg
}

func TestFlappingLogIsListedBounded(t *testing.T) {
	meta, rows := flapping(20000)
	r, err := FromRows(meta, rows, flappingConfig(), gb10)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := r.WriteJSON(&out); err != nil {
		t.Fatal(err)
	}
	if n := r.Throttle.count(); len(r.Throttle.Episodes) != maxListed || n < 4900 || out.Len() > 32<<10 {
		t.Errorf("%d of %d episodes listed, %d bytes of JSON", len(r.Throttle.Episodes), n, out.Len())
	}
	if r.VerdictState != verdictThrottled {
		t.Errorf("verdict %s: %s", r.VerdictState, r.Verdict)
	}
}

// A flapping log of a million rows (250,000 episodes): the report's memory
// per run (B/op) and output do not grow with the episodes.
func BenchmarkFlappingLog(b *testing.B) {
	for _, n := range []int{100000, 1000000} {
		meta, rows := flapping(n)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			var out bytes.Buffer
			for b.Loop() {
				r, err := FromRows(meta, rows, flappingConfig(), gb10)
				if err != nil {
					b.Fatal(err)
				}
				out.Reset()
				if err := r.WriteJSON(&out); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(out.Len()), "json-bytes")
		})
	}
}
