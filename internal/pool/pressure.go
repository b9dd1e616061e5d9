package pool

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
)

// Pressure is in microseconds; Full is nil on kernels that print only the "some" line.
type Pressure struct {
	Some, Full *uint64
}

// ParsePressure refuses a total cut mid-number and two "some" lines, which
// procfs takes; lines of other kinds are skipped, for kernels to come.
func ParsePressure(data []byte) (Pressure, error) {
	var p Pressure
	if len(data) == 0 {
		return p, errors.New("pressure: empty")
	}
	if data[len(data)-1] != '\n' {
		return p, errors.New("pressure: truncated: the last line has no line end")
	}
	for line := range bytes.Lines(data) {
		fields := bytes.Fields(line)
		if len(fields) == 0 {
			continue
		}
		var dst **uint64
		switch string(fields[0]) {
		case "some":
			dst = &p.Some
		case "full":
			dst = &p.Full
		default:
			continue
		}
		if *dst != nil {
			return Pressure{}, fmt.Errorf("pressure: %s appears twice", fields[0])
		}
		total, err := pressureLine(fields[1:])
		if err != nil {
			return Pressure{}, fmt.Errorf("pressure: %s: %w", fields[0], err)
		}
		*dst = &total
	}
	if p.Some == nil && p.Full == nil {
		return p, errors.New("pressure: neither a some nor a full line")
	}
	return p, nil
}

// pressureLine checks "avg10=F avg60=F avg300=F total=N" and returns N.
func pressureLine(fields [][]byte) (uint64, error) {
	keys := []string{"avg10", "avg60", "avg300", "total"}
	if len(fields) != len(keys) {
		return 0, fmt.Errorf("want %d fields, got %d", len(keys), len(fields))
	}
	var total uint64
	for i, f := range fields {
		key, value, ok := bytes.Cut(f, []byte{'='})
		if !ok || string(key) != keys[i] {
			return 0, fmt.Errorf("field %d is not %s=", i+1, keys[i])
		}
		var err error
		if keys[i] == "total" {
			total, err = strconv.ParseUint(string(value), 10, 64)
		} else {
			var avg float64
			avg, err = strconv.ParseFloat(string(value), 64)
			if err == nil && !(avg >= 0 && avg <= 100) {
				err = errors.New("out of range")
			}
		}
		if err != nil {
			return 0, fmt.Errorf("%s: not a number in range", keys[i])
		}
	}
	return total, nil
}
