package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/judge"
	"github.com/spark-exporter/spark_exporter/internal/thermallog"
)

// Any log that parses reports without a panic, and its report writes as
// text, valid JSON and SVG: no NaN, no zero time, the samples in order.
func FuzzFromLog(f *testing.F) {
	f.Add("timestamp, name, temperature.gpu, power.draw [W], clocks.sm [MHz], utilization.gpu [%]\n" +
		"2025/11/24 14:00:00.000, NVIDIA GB10, 80, 90 W, 2440 MHz, 97 %\n2025/11/24 14:00:05.000, NVIDIA GB10, 81, 91 W, 2430 MHz, 97 %\n")
	f.Add("1, 50, 100 W\n2, 51, 100 W\n1e9, 52, 100 W\n")
	f.Add("2025-11-24T14:00:00Z, 50, 100 W\n2026-11-24T14:00:00Z, 60, 100 W\n2025-11-24T14:00:00Z, 55, 100 W\n")
	f.Add("#Date Time gpu pwr gtemp sm pclk\n20240212 14:31:06 0 69 41 90 1410\n20240212 14:31:07 1 69 41 90 1410\n20240212 14:31:07 0 70 42 91 1400\n")
	f.Add("elapsed_s,power_w,temp_c,sm_mhz,gpu_util,mem_used_mb\n10,88.1,84,2450,96,1\n20,88.5,85,2440,96,1\n30,89,85,2000,96,1\n")
	flapping := "timestamp, temperature.gpu, power.draw [W], clocks.sm [MHz], clocks_event_reasons.active\n"
	for i := 0; i < 60; i++ {
		flapping += fmt.Sprintf("2025/11/24 14:%02d:%02d.000, 80, 95 W, 2400 MHz, 0x%x\n", i/60, i%60, (i/2)%2*0x20)
	}
	f.Add(flapping)
	f.Add("elapsed_s,power_w,temp_c,sm_mhz,gpu_util,mem_used_mb\n10,88,84,2450,96,1\n20,15,80,2500,0,1\n30,1e4,85,2420,96,1\n40,-0.5,85,2300,96,1\n50,88,91,2100,96,1\n")
	f.Fuzz(func(t *testing.T, in string) {
		tr, err := thermallog.ParseOptions(strings.NewReader(in), thermallog.Options{Location: time.UTC, Interval: time.Second})
		var malformed thermallog.MalformedError
		if err != nil && !errors.As(err, &malformed) {
			return
		}
		for _, opt := range []LogOptions{{}, gb10} {
			r, err := FromLog(tr, judge.DefaultThermalConfig(), opt)
			if err != nil {
				continue
			}
			if r.Start.IsZero() || r.End.Before(r.Start) || r.Samples == 0 || len(r.Throttle.Episodes) > maxListed {
				t.Fatalf("start %v, end %v, %d samples, %d episodes listed", r.Start, r.End, r.Samples, len(r.Throttle.Episodes))
			}
			var js, text, svg bytes.Buffer
			if err := r.WriteJSON(&js); err != nil || !json.Valid(js.Bytes()) {
				t.Fatalf("JSON %v: %s", err, js.String())
			}
			if err := r.WriteText(&text); err != nil || strings.Contains(text.String(), "NaN") {
				t.Fatalf("text %v: %s", err, text.String())
			}
			if err := r.WriteSVG(&svg); err != nil {
				t.Fatal(err)
			}
		}
	})
}
