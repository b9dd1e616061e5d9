package pool

import (
	"errors"
	"fmt"
	"io/fs"
	"syscall"

	"github.com/spark-exporter/spark_exporter/internal/hostfs"
)

// Memory is meminfo and the memory pressure, read together.
type Memory struct {
	Snapshot Snapshot
	// Pressure is nil on a kernel without PSI (before 4.20, or psi=0).
	Pressure *Pressure
}

// ReadMemory reads meminfo and /proc/pressure/memory within r's batch; a
// blocked meminfo is not followed by the pressure's read.
func ReadMemory(r *hostfs.Reader) (Memory, error) {
	data, err := r.ReadFile("meminfo", nil)
	if err != nil {
		return Memory{}, fmt.Errorf("reading meminfo: %w", err)
	}
	var m Memory
	if m.Snapshot, err = Parse(data); err != nil {
		return Memory{}, err
	}
	data, err = r.ReadFile("pressure/memory", nil)
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.EOPNOTSUPP):
		return m, nil
	case err != nil:
		return Memory{}, fmt.Errorf("reading memory pressure: %w", err)
	}
	psi, err := ParsePressure(data)
	if err != nil {
		return Memory{}, err
	}
	m.Pressure = &psi
	return m, nil
}
