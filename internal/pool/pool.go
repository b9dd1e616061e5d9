// Package pool reads the unified CPU/GPU memory pool of a DGX Spark as
// /proc/meminfo shows it, and works out the figures a user budgets with. The
// pool collector and the plan command both read it through here, so that the
// headroom a dashboard shows is the headroom a plan is checked against.
package pool

import (
	"errors"
	"fmt"
	"math"

	"github.com/prometheus/procfs"

	"github.com/spark-exporter/spark_exporter/internal/hostfs"
)

// Snapshot is the pool at one moment, in bytes.
type Snapshot struct {
	Total     uint64 // MemTotal
	Free      uint64 // MemFree: `free`'s "free" column, the figure to budget against
	Available uint64 // MemAvailable: the kernel's estimate, counting reclaimable cache
	PageCache uint64 // Buffers + Cached + SReclaimable: `free`'s "buff/cache"
	Flushable uint64 // what `sync; echo 3 > /proc/sys/vm/drop_caches` would give back
	Mapped    uint64 // Mapped: mmap'd file pages, such as safetensors during a load
	// HugePages is HugePages_Total × Hugepagesize; nil on kernels built
	// without hugetlbfs, which print neither line.
	HugePages *uint64
	// CMA is the contiguous memory area (CmaTotal, CmaFree); nil on
	// kernels built without CONFIG_CMA, which print neither line.
	CMA *CMA
}

// CMA is the kernel's contiguous memory area in bytes. Its free pages
// count in MemFree and MemAvailable, yet an allocation that cannot move
// (the GPU driver's pinned memory) cannot use them (docs/design.md).
type CMA struct {
	Total uint64 // CmaTotal
	Free  uint64 // CmaFree
}

// AccountingInvalid is CmaFree above CmaTotal: kernel 7.0.0-1019 prints
// CmaTotal 0 beside the free pages of CMA areas it does not count
// (docs/design.md). Those pages are still free CMA, which pinned
// allocations cannot use: Usable subtracts them all the same.
func (c CMA) AccountingInvalid() bool { return c.Free > c.Total }

func (s Snapshot) cmaFree() uint64 {
	if s.CMA == nil {
		return 0
	}
	return s.CMA.Free
}

// Usable is MemAvailable less free CMA pages, never below 0: what an
// allocation that cannot use CMA can still get. It falls with danger on a
// GB10 serving a model, while MemFree rises into a kill (docs/design.md).
func (s Snapshot) Usable() uint64 {
	if c := s.cmaFree(); c < s.Available {
		return s.Available - c
	}
	return 0
}

// Read reads /proc/meminfo under procPath (--path.procfs).
func Read(procPath string) (Snapshot, error) {
	data, err := hostfs.New(procPath).ReadFile("meminfo", nil)
	if err != nil {
		return Snapshot{}, fmt.Errorf("reading meminfo: %w", err)
	}
	return Parse(data)
}

// Parse works out the pool from the text of /proc/meminfo.
func Parse(data []byte) (Snapshot, error) {
	m, err := ParseMeminfo(data)
	if err != nil {
		return Snapshot{}, err
	}
	return FromMeminfo(m)
}

// maxKiB is the largest meminfo value (in kB) whose byte count fits an int64,
// so that headroom arithmetic cannot wrap. Anything larger is corrupt input.
const maxKiB = math.MaxInt64 / 1024 / 4

// FromMeminfo derives the pool's figures from parsed meminfo. A missing
// field is an error: the figures would be wrong rather than missing.
func FromMeminfo(m procfs.Meminfo) (Snapshot, error) {
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

	// Hugepagesize is in kB; HugePages_Total is a count of pages.
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

// Headroom is free memory less free CMA pages and the reserve kept for the
// OS and driver: what a new job may take without a flush. It is negative on
// a healthy Spark whose page cache fills the pool: a planning figure, not a
// danger one (Usable is that).
func (s Snapshot) Headroom(reserve uint64) int64 {
	return int64(s.Free) - int64(s.cmaFree()) - int64(reserve)
}

// HeadroomAfterFlush is the headroom once the page cache is dropped: step 1
// of the OOM ladder.
func (s Snapshot) HeadroomAfterFlush(reserve uint64) int64 {
	return int64(s.Free) - int64(s.cmaFree()) + int64(s.Flushable) - int64(reserve)
}
