package thermal

import (
	"testing"

	"github.com/spark-exporter/spark_exporter/internal/judge"
)

// BenchmarkMonitorStep is the live sampler's step on a full default window
// (docs/performance.md).
func BenchmarkMonitorStep(b *testing.B) {
	cfg := judge.DefaultThermalConfig()
	m := NewMonitor(cfg)
	at, i := t0, 0
	step := func() {
		i++
		at = at.Add(cfg.Interval)
		m.Step(at, &judge.ThermalSample{Time: at, Temperature: 70 + float64(i%600)/60, Power: 100 + float64(i%3),
			Utilization: ptr(0.97), SMClock: ptr(2.45e9 - float64(i%7)*1e7)})
	}
	for range cfg.Capacity() {
		step()
	}
	b.ReportAllocs()
	for b.Loop() {
		step()
	}
}
