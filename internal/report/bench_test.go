package report

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/judge"
	"github.com/spark-exporter/spark_exporter/internal/thermallog"
)

// fastLog is a log of n rows every interval, with a header.
func fastLog(n int, interval time.Duration) string {
	var b strings.Builder
	b.WriteString("timestamp, temperature.gpu, power.draw [W], utilization.gpu [%]\n")
	start := time.Date(2025, 11, 24, 14, 0, 0, 0, time.UTC)
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "%s, %d, %d W, 97 %%\n", start.Add(time.Duration(i)*interval).Format("2006/01/02 15:04:05.000"), 70+i*20/n, 100+i%3)
	}
	return b.String()
}

// The report's cost per row, parse and replay, at 5 ms and 5 s rows:
// time per row flat in the number of rows (docs/performance.md).
func BenchmarkFromLog(b *testing.B) {
	for _, interval := range []time.Duration{5 * time.Millisecond, 5 * time.Second} {
		for _, n := range []int{10000, 40000} {
			log := fastLog(n, interval)
			b.Run(fmt.Sprintf("%v/%d", interval, n), func(b *testing.B) {
				for b.Loop() {
					tr, err := thermallog.ParseOptions(strings.NewReader(log), thermallog.Options{Location: time.UTC})
					if err != nil {
						b.Fatal(err)
					}
					if _, err := FromLog(tr, judge.DefaultThermalConfig(), gb10); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/row")
			})
		}
	}
}

// The report's cost per row at the default window against a 1-minute one, on 1 s rows (docs/performance.md).
func BenchmarkReportWindow(b *testing.B) {
	const n = 20000
	log := fastLog(n, time.Second)
	for _, window := range []time.Duration{10 * time.Minute, time.Minute} {
		b.Run(window.String(), func(b *testing.B) {
			cfg := judge.DefaultThermalConfig()
			cfg.Window = window
			for b.Loop() {
				tr, err := thermallog.ParseOptions(strings.NewReader(log), thermallog.Options{Location: time.UTC})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := FromLog(tr, cfg, gb10); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/row")
		})
	}
}
