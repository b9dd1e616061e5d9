package status

import (
	"fmt"
	"math"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/units"
)

// page.js formats nothing: the page, its View and the text summary format here.

// gib is GiB with one decimal, as free -g counts; negative headroom keeps its sign.
func gib(b int64) string {
	return units.FormatGiB(float64(b))
}

func percent(r float64) string { return fmt.Sprintf("%.0f %%", r*100) }

func watts(w float64) string { return fmt.Sprintf("%.1f W", w) }

func celsius(c float64) string { return fmt.Sprintf("%.1f °C", c) }

func mhz(hz float64) string { return fmt.Sprintf("%.0f MHz", hz/1e6) }

// milliseconds is seconds as milliseconds, one decimal.
func milliseconds(s float64) string { return fmt.Sprintf("%.1f ms", s*1e3) }

// duration is a span in whole seconds, minutes and hours: 45s, 3m 20s, 1h 5m.
func duration(d time.Duration) string {
	s := int64(math.Round(d.Seconds()))
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		if s%60 == 0 {
			return fmt.Sprintf("%dm", s/60)
		}
		return fmt.Sprintf("%dm %ds", s/60, s%60)
	}
	if s%3600/60 == 0 {
		return fmt.Sprintf("%dh", s/3600)
	}
	return fmt.Sprintf("%dh %dm", s/3600, s%3600/60)
}

// waited is in the words a runbook uses: 45 seconds, 9 minutes, 3 hours.
func waited(d time.Duration) string {
	n, unit := int64(d/time.Second), "second"
	switch {
	case d >= 2*time.Hour:
		n, unit = int64(d/time.Hour), "hour"
	case d >= time.Minute:
		n, unit = int64(d/time.Minute), "minute"
	}
	if n != 1 {
		unit += "s"
	}
	return fmt.Sprintf("%d %s", n, unit)
}

func secondsDuration(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func gbitsPerSecond(b float64) string { return fmt.Sprintf("%.0f Gb/s", b/1e9) }

// gbytesPerSecond is bytes per second as GB/s (10^9), one decimal under 10.
func gbytesPerSecond(b float64) string {
	if b < 10e9 {
		return fmt.Sprintf("%.1f GB/s", b/1e9)
	}
	return fmt.Sprintf("%.0f GB/s", b/1e9)
}
