package collector

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sync/atomic"
	"syscall"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/spark-exporter/spark_exporter/internal/cliflag"
	"github.com/spark-exporter/spark_exporter/internal/collected"
	"github.com/spark-exporter/spark_exporter/internal/hostfs"
	"github.com/spark-exporter/spark_exporter/internal/pool"
	"github.com/spark-exporter/spark_exporter/internal/vmstat"
)

// The pool collector reports the 128 GB unified memory pool that the GB10's
// CPU and GPU share: the usable memory that falls with danger (MemAvailable
// less free CMA pages), the headroom a new job may take (MemFree less free
// CMA and a reserve, which nvidia-smi cannot show), the page cache that eats
// it unseen, and the signs of eviction (stalls, refaults, reclaim, OOM kills).
func init() {
	registerCollector("pool", defaultEnabled, func(fg cliflag.FlagGroup) Factory {
		settings := AddPoolFlags(fg)
		return func(env Env) (Collector, error) {
			return newPoolCollector(hostfs.New(env.ProcFS), settings.Reserve(), env.Logger)
		}
	})
}

// addPoolReserveFlag registers --pool.reserve (AddPoolFlags).
func addPoolReserveFlag(fg cliflag.FlagGroup) *uint64 {
	return cliflag.Bytes(fg.Flag("pool.reserve",
		"Memory kept back for the OS and driver; headroom is MemFree minus this. GiB is 2^30 bytes, GB 10^9: 4GiB, 512MiB, 4GB.").
		Default("4GiB"))
}

var (
	poolTotalDesc     = newDesc("spark_pool_total_bytes", "MemTotal: the unified CPU/GPU memory pool.")
	poolFreeDesc      = newDesc("spark_pool_free_bytes", "MemFree: the free column of free(1), the figure to budget a job against.")
	poolAvailableDesc = newDesc("spark_pool_available_bytes", "MemAvailable: the kernel's estimate of memory available without swapping, counting reclaimable cache (and free CMA pages).")
	poolUsableDesc    = newDesc("spark_pool_usable_bytes", "max(0, MemAvailable - CmaFree): what an allocation that cannot use CMA pages (the GPU driver's pinned memory) can still get, reclaim included. The gauge that falls with danger.")
	poolCMATotalDesc  = newDesc("spark_pool_cma_total_bytes", "CmaTotal: the kernel's contiguous memory area.")
	poolCMAFreeDesc   = newDesc("spark_pool_cma_free_bytes", "CmaFree: free CMA pages, counted in MemFree and MemAvailable yet unusable for pinned, non-movable allocations.")
	poolCacheDesc     = newDesc("spark_pool_page_cache_bytes", "Buffers + Cached + SReclaimable: the buff/cache column of free(1).")
	poolFlushDesc     = newDesc("spark_pool_flushable_bytes", "Estimate of what dropping caches gives back: max(0, Buffers + Cached - Shmem - Mapped) + SReclaimable.")
	poolMappedDesc    = newDesc("spark_pool_mapped_bytes", "Mapped: mmap'd file pages, such as model weights during a load.")
	poolHugeDesc      = newDesc("spark_pool_hugepages_bytes", "HugePages_Total x Hugepagesize: memory held back in huge pages.")
	poolReserveDesc   = newDesc("spark_pool_reserve_bytes", "Memory kept back for the OS and driver (--pool.reserve).")
	poolHeadroomDesc  = newDesc("spark_pool_headroom_bytes", "MemFree minus CmaFree minus the reserve: what a new job may take without a flush (planning, not danger). Negative when free is below the reserve, as with a full page cache.")
	poolAfterFlush    = newDesc("spark_pool_headroom_after_flush_bytes", "MemFree minus CmaFree plus flushable page cache minus the reserve: headroom after step 1 of the OOM ladder.")
	poolStallDesc     = newDesc("spark_pool_pressure_stall_seconds_total", "Time tasks stalled waiting for memory (PSI); kind=some: at least one task, full: all non-idle tasks.", "kind")
	poolMajFaultDesc  = newDesc("spark_pool_major_faults_total", "Major page faults (vmstat pgmajfault).")
	poolRefaultDesc   = newDesc("spark_pool_refaults_total", "Evicted pages read back in (vmstat workingset_refault_*).", "type")
	poolReclaimDesc   = newDesc("spark_pool_reclaimed_pages_total", "Pages reclaimed, by kswapd or by allocating tasks directly (vmstat pgsteal_*).", "by")
	poolStallsDesc    = newDesc("spark_pool_allocation_stalls_total", "Allocations that stalled for direct reclaim (sum of vmstat allocstall_*).")
	poolOOMDesc       = newDesc("spark_pool_oom_kills_total", "Processes killed by the kernel OOM killer (vmstat oom_kill).")
	poolSupportedDesc = newDesc("spark_pool_field_supported", "1 when the running kernel provides the field, 0 when it does not (its series are then absent).", "field")
)

type poolCollector struct {
	proc    hostfs.FS // --path.procfs
	reserve uint64
	logger  log.Logger
	// last is what the latest Update rendered; nil when it failed.
	last atomic.Pointer[collected.Pool]
}

func (c *poolCollector) publish(st *collected.State) { st.Pool = c.last.Load() }

func newPoolCollector(proc hostfs.FS, reserve uint64, logger log.Logger) (*poolCollector, error) {
	return &poolCollector{
		proc:    proc,
		reserve: reserve, logger: logger,
	}, nil
}

func (c *poolCollector) refresh(ctx context.Context) error {
	snap, _, _, _, err := c.read(ctx)
	c.remember(snap, err)
	return err
}

func (c *poolCollector) remember(snap pool.Snapshot, err error) {
	if err != nil {
		c.last.Store(nil)
		return
	}
	c.last.Store(&collected.Pool{Snapshot: snap, Reserve: c.reserve})
}

func (c *poolCollector) Update(ctx context.Context, ch chan<- prometheus.Metric) error {
	// Read every source before sending anything, so that a failed scrape
	// sends no half set of pool figures.
	snap, vm, psi, psiOK, err := c.read(ctx)
	c.remember(snap, err)
	if err != nil {
		return err
	}

	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	optional := func(d *prometheus.Desc, v *uint64, labels ...string) {
		if v != nil {
			counter(d, float64(*v), labels...)
		}
	}

	gauge(poolTotalDesc, float64(snap.Total))
	gauge(poolFreeDesc, float64(snap.Free))
	gauge(poolAvailableDesc, float64(snap.Available))
	gauge(poolUsableDesc, float64(snap.Usable()))
	if snap.CMA != nil {
		gauge(poolCMATotalDesc, float64(snap.CMA.Total))
		gauge(poolCMAFreeDesc, float64(snap.CMA.Free))
	}
	gauge(poolCacheDesc, float64(snap.PageCache))
	gauge(poolFlushDesc, float64(snap.Flushable))
	gauge(poolMappedDesc, float64(snap.Mapped))
	if snap.HugePages != nil {
		gauge(poolHugeDesc, float64(*snap.HugePages))
	}
	gauge(poolReserveDesc, float64(c.reserve))
	gauge(poolHeadroomDesc, float64(snap.Headroom(c.reserve)))
	gauge(poolAfterFlush, float64(snap.HeadroomAfterFlush(c.reserve)))

	if psiOK {
		// PSI totals are in microseconds.
		if psi.Some != nil {
			counter(poolStallDesc, float64(*psi.Some)/1e6, "some")
		}
		if psi.Full != nil {
			counter(poolStallDesc, float64(*psi.Full)/1e6, "full")
		}
	}
	optional(poolMajFaultDesc, vm.MajorFaults)
	optional(poolRefaultDesc, vm.RefaultsAnon, "anon")
	optional(poolRefaultDesc, vm.RefaultsFile, "file")
	optional(poolReclaimDesc, vm.ReclaimedKswapd, "kswapd")
	optional(poolReclaimDesc, vm.ReclaimedDirect, "direct")
	optional(poolStallsDesc, vm.AllocStalls)
	optional(poolOOMDesc, vm.OOMKills)

	for _, f := range []struct {
		field string
		ok    bool
	}{
		{"psi", psiOK},
		{"major_faults", vm.MajorFaults != nil},
		// Kernels before 5.9 count file refaults only; anon refaults are
		// then absent while the field is still supported.
		{"refaults", vm.RefaultsAnon != nil || vm.RefaultsFile != nil},
		{"reclaimed_pages", vm.ReclaimedKswapd != nil || vm.ReclaimedDirect != nil},
		{"allocation_stalls", vm.AllocStalls != nil},
		{"oom_kills", vm.OOMKills != nil},
		{"hugepages", snap.HugePages != nil},
		{"cma", snap.CMA != nil},
	} {
		gauge(poolSupportedDesc, boolToFloat64(f.ok), f.field)
	}
	return nil
}

// read reads and parses meminfo, vmstat and the memory pressure.
func (c *poolCollector) read(ctx context.Context) (snap pool.Snapshot, vm vmstat.Counters, psi pool.Pressure, psiOK bool, err error) {
	// One batch, so that a blocked file costs one wait of the run's
	// deadline and no file after it is read.
	var (
		meminfo, vmstatData, pressure []byte
		meminfoErr, vmstatErr, psiErr error
	)
	if err := c.proc.WithContext(ctx).Batch(func(r *hostfs.Reader) error {
		if meminfo, meminfoErr = r.ReadFile("meminfo", nil); errors.Is(meminfoErr, hostfs.ErrBlocked) {
			return nil
		}
		if vmstatData, vmstatErr = r.ReadFile("vmstat", nil); errors.Is(vmstatErr, hostfs.ErrBlocked) {
			return nil
		}
		pressure, psiErr = r.ReadFile("pressure/memory", nil)
		return nil
	}); err != nil {
		return snap, vm, psi, false, fmt.Errorf("reading the pool's files: %w", err)
	}
	if meminfoErr != nil {
		return snap, vm, psi, false, fmt.Errorf("reading meminfo: %w", meminfoErr)
	}
	if snap, err = pool.Parse(meminfo); err != nil {
		return snap, vm, psi, false, err
	}
	if vmstatErr != nil {
		return snap, vm, psi, false, fmt.Errorf("reading vmstat: %w", vmstatErr)
	}
	if vm, err = vmstat.Parse(vmstatData); err != nil {
		return snap, vm, psi, false, err
	}
	psi, psiOK, err = memoryPressure(pressure, psiErr)
	return snap, vm, psi, psiOK, err
}

// memoryPressure reads /proc/pressure/memory. A kernel without PSI (before
// 4.20, or booted with psi=0) has no such file or refuses the read; that is
// a missing field, not a failure.
func memoryPressure(data []byte, err error) (pool.Pressure, bool, error) {
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.EOPNOTSUPP):
		return pool.Pressure{}, false, nil
	case err != nil:
		return pool.Pressure{}, false, fmt.Errorf("reading memory pressure: %w", err)
	}
	psi, err := pool.ParsePressure(data)
	if err != nil {
		return pool.Pressure{}, false, err
	}
	return psi, true, nil
}
