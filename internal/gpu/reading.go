// Package gpu is the exporter's narrow view of NVML: what the gpu and
// thermal collectors read from each device.
package gpu

import (
	"context"
	"time"
)

// Reading is one device's state at one moment, as NVML reported it. A nil
// field is a value NVML did not give this time (not supported by the
// device, or the call failed); it is never replaced by a guess.
type Reading struct {
	Index int       // NVML device index
	UUID  string    // NVML device UUID
	Time  time.Time // when the reading was taken

	TemperatureCelsius *float64 // GPU core temperature
	PowerWatts         *float64 // power draw
	SMClockHertz       *float64 // current SM clock
	SMClockMaxHertz    *float64 // maximum SM clock
	Utilization        *float64 // GPU busy ratio, 0–1
	// ClockEventReasons is NVML's bit mask of why clocks are held down
	// (nvml.ClocksEventReason* constants: thermal slowdowns, power cap, …).
	ClockEventReasons *uint64
}

// Source reads every device. Read returns within the context's deadline;
// an error means no reading this time (NVML absent, wedged or failing), and
// the caller carries on.
type Source interface {
	Read(ctx context.Context) ([]Reading, error)
}
