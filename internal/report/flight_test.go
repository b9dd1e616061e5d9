package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/flight"
)

// A digest of more records than it draws keeps maxFlightSamples points at
// most, the lowest among them, and still counts and spans every record.
func TestFlightSamplesBounded(t *testing.T) {
	f := NewFlight(flight.Boot{}, -1, 0, time.UTC)
	start := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	const n = 3*maxFlightSamples + 7
	for i := range n {
		usable := uint64(50 << 30)
		if i == 5000 {
			usable = 1 << 30
		}
		f.Add(flight.Record{Time: start.Add(time.Duration(i) * time.Second), Pool: &flight.Pool{Available: usable, Usable: &usable}})
	}
	s := f.summary()
	lowest := false
	for _, p := range s.samples {
		lowest = lowest || p.Usable == 1<<30
	}
	if len(s.samples) > maxFlightSamples || !lowest || s.Records != n || !s.To.Equal(start.Add((n-1)*time.Second)) {
		t.Errorf("%d samples (the lowest kept: %v), %d records to %v", len(s.samples), lowest, s.Records, s.To)
	}
	var svg bytes.Buffer
	err := f.WriteSVG(&svg)
	_, points, _ := strings.Cut(svg.String(), `points="`)
	points, _, _ = strings.Cut(points, `"`)
	if n := len(strings.Fields(points)); err != nil || n == 0 || n > maxFlightSamples {
		t.Errorf("SVG: %v, %d points", err, n)
	}
}
