package collector

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/spark-exporter/spark_exporter/internal/cliflag"
	"github.com/spark-exporter/spark_exporter/internal/collected"
	"github.com/spark-exporter/spark_exporter/internal/hostfs"
	"github.com/spark-exporter/spark_exporter/internal/judge"
	"github.com/spark-exporter/spark_exporter/internal/pool"
	"github.com/spark-exporter/spark_exporter/internal/vmstat"
)

// The pool collector reports the 128 GB unified memory pool that the GB10's
// CPU and GPU share: the usable memory that falls with danger (MemAvailable
// less free CMA pages), the headroom a new job may take (MemFree less free
// CMA and a reserve, which nvidia-smi cannot show), the page cache that eats
// it unseen, the signs of eviction (stalls, refaults, reclaim, OOM kills),
// and the large free blocks the driver's contiguous allocations need.
func init() {
	registerCollector("pool", defaultEnabled, func(fg cliflag.FlagGroup) Factory {
		settings := AddPoolFlags(fg)
		return func(env Env) (Collector, error) {
			c, err := newPoolCollector(hostfs.New(env.ProcFS), settings.Reserve(), env.Logger)
			if c != nil {
				c.results = env.Results
			}
			return c, err
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

	poolCMAInvalidDesc   = newDesc("spark_pool_cma_accounting_invalid", "1 when the kernel reports more free CMA than its CMA area (CmaFree above CmaTotal, as kernel 7.0.0-1019 does): its CMA accounting is wrong and memory sits reserved; 0 otherwise.")
	poolCompactStallDesc = newDesc("spark_pool_compaction_stalls_total", "Allocations that had to compact memory first (vmstat compact_stall).")
	poolCompactFailDesc  = newDesc("spark_pool_compaction_failures_total", "Compactions that found no free block of the size asked for (vmstat compact_fail).")
	poolFreeBlocksDesc   = newDesc("spark_pool_free_blocks", "Free blocks of 2^order contiguous pages (/proc/buddyinfo): what the GPU driver's large contiguous allocations draw on, whatever MemAvailable says.", "node", "zone", "order")
	poolPageSizeDesc     = newDesc("spark_pool_page_size_bytes", "The kernel's page size: an order-0 block.")
	poolBlockSizeDesc    = newDesc("spark_pool_block_size_bytes", "The size of a block of this order: 2^order pages.", "order")
)

type poolCollector struct {
	proc    hostfs.FS // --path.procfs
	reserve uint64
	logger  log.Logger
	results *collected.Results
	// last is what the latest Update rendered; nil when it failed.
	last atomic.Pointer[collected.Pool]
	// pageSize does not change while the kernel runs.
	pageSize atomic.Uint64
	now      func() time.Time
	mu       sync.Mutex
	// compactFails is compact_fail over SparkPoolFragmented's window.
	compactFails pool.RateWindow
}

func (c *poolCollector) store(st *collected.State) { st.Pool = c.last.Load() }

// Close closes the files held open from one scrape to the next.
func (c *poolCollector) Close() error { return c.proc.Close() }

func newPoolCollector(proc hostfs.FS, reserve uint64, logger log.Logger) (*poolCollector, error) {
	return &poolCollector{
		proc:    proc.Holding(),
		reserve: reserve, logger: logger,
		now:          time.Now,
		compactFails: pool.RateWindow{Span: 5 * time.Minute, Step: 10 * time.Second},
	}, nil
}

func (c *poolCollector) remember(r poolReading, err error) {
	if err != nil {
		c.last.Store(nil)
		return
	}
	p := collected.PoolOf(r.mem, c.reserve)
	if large, ok := pool.LargeFreeBytes(r.zones, r.pageSize, judge.LargeBlockBytes); ok {
		p.LargeFreeBytes = &large
	}
	if fails := r.vm.CompactFails; fails != nil {
		c.mu.Lock()
		rate, ok := c.compactFails.Add(c.now(), *fails)
		c.mu.Unlock()
		if ok {
			p.CompactionFailuresPerSecond = &rate
		}
	}
	c.last.Store(p)
}

func (c *poolCollector) Update(ctx context.Context, ch chan<- prometheus.Metric) error {
	// Read every source before sending anything, so that a failed scrape
	// sends no half set of pool figures.
	r, err := c.read(ctx)
	c.remember(r, err)
	c.results.Set(c.store)
	if err != nil {
		return err
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	sendMeminfo(gauge, r.mem.Snapshot, c.reserve)
	sendCounters(ch, r)
	sendBlocks(gauge, r)
	vm := r.vm
	for _, f := range []struct {
		field string
		ok    bool
	}{
		{"psi", r.mem.Pressure != nil},
		{"major_faults", vm.MajorFaults != nil},
		// Kernels before 5.9 count file refaults only; anon refaults are
		// then absent while the field is still supported.
		{"refaults", vm.RefaultsAnon != nil || vm.RefaultsFile != nil},
		{"reclaimed_pages", vm.ReclaimedKswapd != nil || vm.ReclaimedDirect != nil},
		{"allocation_stalls", vm.AllocStalls != nil},
		{"oom_kills", vm.OOMKills != nil},
		{"compaction", vm.CompactStalls != nil && vm.CompactFails != nil},
		{"hugepages", r.mem.Snapshot.HugePages != nil},
		{"cma", r.mem.Snapshot.CMA != nil},
		{"buddyinfo", r.zones != nil},
		{"page_size", r.pageSize != 0},
	} {
		gauge(poolSupportedDesc, boolToFloat64(f.ok), f.field)
	}
	return nil
}

func sendMeminfo(gauge func(*prometheus.Desc, float64, ...string), snap pool.Snapshot, reserve uint64) {
	gauge(poolTotalDesc, float64(snap.Total))
	gauge(poolFreeDesc, float64(snap.Free))
	gauge(poolAvailableDesc, float64(snap.Available))
	gauge(poolUsableDesc, float64(snap.Usable()))
	if snap.CMA != nil {
		gauge(poolCMATotalDesc, float64(snap.CMA.Total))
		gauge(poolCMAFreeDesc, float64(snap.CMA.Free))
		gauge(poolCMAInvalidDesc, boolToFloat64(snap.CMA.AccountingInvalid()))
	}
	gauge(poolCacheDesc, float64(snap.PageCache))
	gauge(poolFlushDesc, float64(snap.Flushable))
	gauge(poolMappedDesc, float64(snap.Mapped))
	if snap.HugePages != nil {
		gauge(poolHugeDesc, float64(*snap.HugePages))
	}
	gauge(poolReserveDesc, float64(reserve))
	gauge(poolHeadroomDesc, float64(snap.Headroom(reserve)))
	gauge(poolAfterFlush, float64(snap.HeadroomAfterFlush(reserve)))
}

func sendCounters(ch chan<- prometheus.Metric, r poolReading) {
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}
	optional := func(d *prometheus.Desc, v *uint64, labels ...string) {
		if v != nil {
			counter(d, float64(*v), labels...)
		}
	}
	if psi := r.mem.Pressure; psi != nil {
		// PSI totals are in microseconds.
		if psi.Some != nil {
			counter(poolStallDesc, float64(*psi.Some)/1e6, "some")
		}
		if psi.Full != nil {
			counter(poolStallDesc, float64(*psi.Full)/1e6, "full")
		}
	}
	vm := r.vm
	optional(poolMajFaultDesc, vm.MajorFaults)
	optional(poolRefaultDesc, vm.RefaultsAnon, "anon")
	optional(poolRefaultDesc, vm.RefaultsFile, "file")
	optional(poolReclaimDesc, vm.ReclaimedKswapd, "kswapd")
	optional(poolReclaimDesc, vm.ReclaimedDirect, "direct")
	optional(poolStallsDesc, vm.AllocStalls)
	optional(poolOOMDesc, vm.OOMKills)
	if vm.CompactStalls != nil && vm.CompactFails != nil {
		counter(poolCompactStallDesc, float64(*vm.CompactStalls))
		counter(poolCompactFailDesc, float64(*vm.CompactFails))
	}
}

// sendBlocks sends the free blocks by node, zone and order, and the size of
// a block of each order where the page size is known.
func sendBlocks(gauge func(*prometheus.Desc, float64, ...string), r poolReading) {
	for _, z := range r.zones {
		for order, n := range z.Free {
			gauge(poolFreeBlocksDesc, float64(n), z.Node, z.Name, strconv.Itoa(order))
		}
	}
	if r.pageSize == 0 {
		return
	}
	gauge(poolPageSizeDesc, float64(r.pageSize))
	if len(r.zones) > 0 {
		for order := range r.zones[0].Free {
			gauge(poolBlockSizeDesc, float64(pool.BlockBytes(r.pageSize, order)), strconv.Itoa(order))
		}
	}
}

type poolReading struct {
	mem      pool.Memory
	vm       vmstat.Counters
	zones    []pool.Zone // nil without /proc/buddyinfo
	pageSize uint64      // 0 where unknown
}

type poolFiles struct {
	mem                                   pool.Memory
	vmstat, buddyinfo, smaps              []byte
	memErr, vmstatErr, buddyErr, smapsErr error
}

// read reads and parses meminfo, vmstat, the memory pressure, buddyinfo
// and, until known, the page size.
func (c *poolCollector) read(ctx context.Context) (poolReading, error) {
	f, err := c.readFiles(ctx)
	if err != nil {
		return poolReading{}, fmt.Errorf("reading the pool's files: %w", err)
	}
	r := poolReading{mem: f.mem}
	if f.memErr != nil {
		return r, f.memErr
	}
	if f.vmstatErr != nil {
		return r, fmt.Errorf("reading vmstat: %w", f.vmstatErr)
	}
	if r.vm, err = vmstat.Parse(f.vmstat); err != nil {
		return r, err
	}
	if r.zones, err = buddyinfo(f.buddyinfo, f.buddyErr); err != nil {
		return r, err
	}
	if r.pageSize, err = c.kernelPageSize(f.smaps, f.smapsErr); err != nil {
		return r, err
	}
	return r, nil
}

func (c *poolCollector) readFiles(ctx context.Context) (f poolFiles, err error) {
	type file struct {
		name string
		data *[]byte
		err  *error
	}
	files := []file{
		{"vmstat", &f.vmstat, &f.vmstatErr},
		{"buddyinfo", &f.buddyinfo, &f.buddyErr},
	}
	if c.pageSize.Load() == 0 {
		files = append(files, file{"self/smaps", &f.smaps, &f.smapsErr})
	}
	// One batch, so that a blocked file costs one wait of the run's
	// deadline and no file after it is read.
	err = c.proc.WithContext(ctx).Batch(func(r *hostfs.Reader) error {
		if f.mem, f.memErr = pool.ReadMemory(r); errors.Is(f.memErr, hostfs.ErrBlocked) {
			return nil
		}
		for _, file := range files {
			if *file.data, *file.err = r.ReadFile(file.name, nil); errors.Is(*file.err, hostfs.ErrBlocked) {
				break
			}
		}
		return nil
	})
	return f, err
}

// buddyinfo parses /proc/buddyinfo; a tree without it (a fixture, a
// stripped /proc) has none, which is a missing field.
func buddyinfo(data []byte, err error) ([]pool.Zone, error) {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading buddyinfo: %w", err)
	}
	return pool.ParseBuddyinfo(data)
}

// kernelPageSize reads the exporter's own smaps once; without smaps
// (CONFIG_PROC_PAGE_MONITOR off) it stays unknown.
func (c *poolCollector) kernelPageSize(data []byte, err error) (uint64, error) {
	if size := c.pageSize.Load(); size != 0 {
		return size, nil
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("reading the page size: %w", err)
	}
	size, err := pool.ParseKernelPageSize(data)
	if err != nil {
		return 0, err
	}
	c.pageSize.Store(size)
	return size, nil
}
