package standin

import (
	"bytes"
	"fmt"
	"math"
	"time"
)

// QueryGPUHeader is the header nvidia-smi --query-gpu=timestamp,power.draw,
// temperature.gpu,clocks.sm,utilization.gpu --format=csv prints.
const QueryGPUHeader = "timestamp, power.draw [W], temperature.gpu, clocks.sm [MHz], utilization.gpu [%]"

// QueryGPULog is the log nvidia-smi would write of device 0 every interval
// from scenario time 0 to span, its first row at start: the library's
// readings, rounded as it rounds them.
func QueryGPULog(text []byte, start time.Time, interval, span time.Duration) ([]byte, error) {
	var times []float64
	for at := time.Duration(0); at <= span; at += interval {
		times = append(times, at.Seconds())
	}
	states, err := Timeline(text, 0, times)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString(QueryGPUHeader + "\n")
	for i, st := range states {
		at := start.Add(time.Duration(times[i] * float64(time.Second)))
		fmt.Fprintf(&b, "%s, %.2f W, %.0f, %.0f MHz, %.0f %%\n", at.Format("2006/01/02 15:04:05.000"),
			math.Round(st.Power*1000)/1000, math.Round(st.Temperature), math.Round(st.SMClock), math.Round(st.Utilization))
	}
	return b.Bytes(), nil
}
