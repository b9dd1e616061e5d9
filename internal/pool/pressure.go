package pool

import (
	"bytes"
	"errors"
	"strconv"
)

// Pressure is /proc/pressure/memory's stall totals, in microseconds: Some,
// time at least one task stalled on memory; Full, time all non-idle tasks
// did. A nil field is a line the kernel did not print (full came in 5.0).
type Pressure struct {
	Some, Full *uint64
}

var errPressure = errors.New("pressure: a some or full line without a total")

// ParsePressure reads the text of a PSI file ("some avg10=0.00 avg60=0.00
// avg300=0.00 total=0"), hand-written for the reason ParseMeminfo is.
// Lines other than some and full are skipped; a some or full line whose
// total cannot be read is an error.
func ParsePressure(data []byte) (Pressure, error) {
	var p Pressure
	for len(data) > 0 {
		var line []byte
		line, data, _ = bytes.Cut(data, []byte{'\n'})
		kind, rest, _ := bytes.Cut(line, []byte{' '})
		var dst **uint64
		switch string(kind) {
		case "some":
			dst = &p.Some
		case "full":
			dst = &p.Full
		default:
			continue
		}
		_, total, ok := bytes.Cut(rest, []byte("total="))
		if !ok || *dst != nil {
			return Pressure{}, errPressure
		}
		total, _, _ = bytes.Cut(total, []byte{' '})
		v, err := strconv.ParseUint(string(total), 10, 64)
		if err != nil {
			return Pressure{}, errPressure
		}
		*dst = &v
	}
	return p, nil
}
