// Package pool works out the unified memory pool's figures, so that the
// headroom a dashboard shows is the headroom a plan is checked against.
package pool

import (
	"errors"
	"fmt"
	"math"

	"github.com/prometheus/procfs"

	"github.com/spark-exporter/spark_exporter/internal/hostfs"
)

// Snapshot is in bytes.
type Snapshot struct {
	Total     uint64 // MemTotal
	Free      uint64 // MemFree: `free`'s "free" column, the figure to budget against
	Available uint64 // MemAvailable: the kernel's estimate, counting reclaimable cache
	PageCache uint64 // Buffers + Cached + SReclaimable: `free`'s "buff/cache"
	Flushable uint64 // what `sync; echo 3 > /proc/sys/vm/drop_caches` would give back
	Mapped    uint64 // Mapped: mmap'd file pages, such as safetensors during a load
	HugePages *uint64
	CMA       *CMA
}

// CMA's free pages count in MemFree and MemAvailable, yet pinned allocations cannot use them.
type CMA struct {
	Total uint64 // CmaTotal
	Free  uint64 // CmaFree
}

// AccountingInvalid is CmaFree above CmaTotal (kernel 7.0.0-1019): Usable subtracts them all the same.
func (c CMA) AccountingInvalid() bool { return c.Free > c.Total }

func (s Snapshot) cmaFree() uint64 {
	if s.CMA == nil {
		return 0
	}
	return s.CMA.Free
}

// Usable falls with danger on a GB10 serving a model, while MemFree rises into a kill.
func (s Snapshot) Usable() uint64 {
	if c := s.cmaFree(); c < s.Available {
		return s.Available - c
	}
	return 0
}

func Read(procPath string) (Snapshot, error) {
	data, err := hostfs.New(procPath).ReadFile("meminfo", nil)
	if err != nil {
		return Snapshot{}, fmt.Errorf("reading meminfo: %w", err)
	}
	return Parse(data)
}

func Parse(data []byte) (Snapshot, error) {
	m, err := parseMeminfo(data)
	if err != nil {
		return Snapshot{}, err
	}
	return fromMeminfo(m)
}

// maxKiB: headroom arithmetic cannot wrap.
const maxKiB = math.MaxInt64 / 1024 / 4

// fromMeminfo: a missing field is an error, as the figures would be wrong rather than missing.
func fromMeminfo(m procfs.Meminfo) (Snapshot, error) {
	var err error
	kib := func(name string, v *uint64) uint64 {
		switch {
		case err != nil:
			return 0
		case v == nil:
			err = fmt.Errorf("meminfo: %s missing", name)
			return 0
		case *v > maxKiB:
			err = fmt.Errorf("meminfo: %s value %d kB out of range", name, *v)
			return 0
		}
		return *v * 1024
	}
	total := kib("MemTotal", m.MemTotal)
	free := kib("MemFree", m.MemFree)
	available := kib("MemAvailable", m.MemAvailable)
	buffers := kib("Buffers", m.Buffers)
	cached := kib("Cached", m.Cached)
	sreclaimable := kib("SReclaimable", m.SReclaimable)
	shmem := kib("Shmem", m.Shmem)
	mapped := kib("Mapped", m.Mapped)
	if err != nil {
		return Snapshot{}, err
	}

	// Shmem (tmpfs, shared anonymous memory) sits inside Cached but cannot
	// be dropped, nor can mapped pages. A mapped page may also be Shmem:
	// the figure is a lower bound, the safe side for a budget.
	flushable := int64(buffers+cached) - int64(shmem) - int64(mapped)
	s := Snapshot{
		Total:     total,
		Free:      free,
		Available: available,
		PageCache: buffers + cached + sreclaimable,
		Flushable: uint64(max(0, flushable)) + sreclaimable,
		Mapped:    mapped,
	}

	if m.HugePagesTotal != nil && m.Hugepagesize != nil {
		size := kib("Hugepagesize", m.Hugepagesize)
		if err != nil {
			return Snapshot{}, err
		}
		if size != 0 && *m.HugePagesTotal > math.MaxInt64/4/size {
			return Snapshot{}, fmt.Errorf("meminfo: HugePages_Total %d out of range", *m.HugePagesTotal)
		}
		h := *m.HugePagesTotal * size
		s.HugePages = &h
	}

	// A kernel built with CMA prints both lines. Free CMA beyond the whole
	// pool is a corrupt read; beyond the area it is the kernel's accounting
	// (CMA.AccountingInvalid).
	switch {
	case m.CmaTotal != nil && m.CmaFree != nil:
		cmaTotal := kib("CmaTotal", m.CmaTotal)
		cmaFree := kib("CmaFree", m.CmaFree)
		switch {
		case err != nil:
			return Snapshot{}, err
		case cmaFree > total:
			return Snapshot{}, fmt.Errorf("meminfo: CmaFree %d kB exceeds MemTotal %d kB", *m.CmaFree, *m.MemTotal)
		}
		s.CMA = &CMA{Total: cmaTotal, Free: cmaFree}
	case m.CmaTotal != nil:
		return Snapshot{}, errors.New("meminfo: CmaTotal without CmaFree")
	case m.CmaFree != nil:
		return Snapshot{}, errors.New("meminfo: CmaFree without CmaTotal")
	}
	return s, nil
}

// Headroom is negative on a healthy Spark whose page cache fills the pool: a planning figure, not a danger one.
func (s Snapshot) Headroom(reserve uint64) int64 {
	return int64(s.Free) - int64(s.cmaFree()) - int64(reserve)
}

func (s Snapshot) HeadroomAfterFlush(reserve uint64) int64 {
	return int64(s.Free) - int64(s.cmaFree()) + int64(s.Flushable) - int64(reserve)
}
