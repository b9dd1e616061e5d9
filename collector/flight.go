package collector

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/spark-exporter/spark_exporter/internal/cliflag"
	"github.com/spark-exporter/spark_exporter/internal/collected"
	"github.com/spark-exporter/spark_exporter/internal/flight"
	"github.com/spark-exporter/spark_exporter/internal/hostfs"
	"github.com/spark-exporter/spark_exporter/internal/judge"
	"github.com/spark-exporter/spark_exporter/internal/kmsg"
	"github.com/spark-exporter/spark_exporter/internal/pool"
	"github.com/spark-exporter/spark_exporter/internal/redact"
	"github.com/spark-exporter/spark_exporter/internal/workload"
)

// The flight recorder writes, every --flight.interval, one record of what
// the collectors found (pool, largest workloads, GPU, kernel log counts) and
// the memory pressure into a fixed-size ring on disk (internal/flight), so
// that after a wedge and a power cycle `spark_exporter report --flight`
// shows the minutes before.
func init() {
	registerConfiguredCollector("flight", "flight.file", func(fg cliflag.FlagGroup) Factory {
		file := fg.Flag("flight.file", "The flight recorder's ring file; the recorder is off without it.").PlaceHolder("FILE").String()
		interval := cliflag.Duration(fg.Flag("flight.interval", "Time between two flight records.").Default("5s"))
		size := cliflag.Bytes(fg.Flag("flight.size", "The flight ring's size on disk (fixed; at 512 bytes a record, 64MiB holds a week at 5s).").Default("64MiB"))
		return func(env Env) (Collector, error) {
			if *file == "" {
				return nil, errors.New("--collector.flight needs --flight.file")
			}
			if *interval < 100*time.Millisecond {
				return nil, errors.New("--flight.interval: at least 100ms")
			}
			return newFlightCollector(*file, *size, *interval, hostfs.New(env.ProcFS).WithTimeout(env.ReadTimeout), env.Logger)
		}
	})
}

var (
	flightRecordsDesc = newDesc("spark_flight_records_total", "Records the flight recorder wrote.")
	flightErrorsDesc  = newDesc("spark_flight_write_errors_total",
		"Flight records that could not be written or synced (a full or read-only disk); the scrape is unaffected.")
	flightUncleanDesc = newDesc("spark_flight_last_boot_unclean",
		"1 when the flight recorder found that the previous boot ended without a clean shutdown, for a day after its end; else 0.")
)

// syncEvery bounds how often records are made durable: each is synced when
// the interval is at least this, so that the newest durable record before a
// power cut is one interval old, at one 4 KiB page write a record (about 70 MB
// a day at 5 s: far inside an NVMe drive's endurance).
const syncEvery = time.Second

// uncleanFor is how long after the previous boot's end it is reported.
const uncleanFor = 24 * time.Hour

type flightCollector struct {
	ring     *flight.Ring // nil: the file could not be opened
	interval time.Duration
	proc     hostfs.FS
	logger   log.Logger
	boot     [16]byte

	records, writeErrors atomic.Uint64
	previous             *flight.Boot // the boot before this one, if recorded

	exporter *Exporter
	mu       sync.Mutex // serialises the ring's writes
	lastSync time.Time
	stop     chan struct{}
	done     chan struct{}
}

func newFlightCollector(path string, size uint64, interval time.Duration, proc hostfs.FS, logger log.Logger) (*flightCollector, error) {
	c := &flightCollector{interval: interval, proc: proc, logger: logger, stop: make(chan struct{}), done: make(chan struct{})}
	c.boot = readBootID(proc)
	ring, err := flight.Open(path, size)
	switch {
	case errors.Is(err, flight.ErrLocked):
		return nil, fmt.Errorf("--flight.file: %w", err)
	case err != nil:
		// A read-only or full disk stops the recorder, never the exporter;
		// the path is not logged.
		c.writeErrors.Add(1)
		level.Error(logger).Log("msg", "the flight recorder cannot open its file; recording nothing", "err", redact.WithoutPath(err))
		close(c.done)
		return c, nil
	}
	c.ring = ring
	if c.previous, err = ring.Previous(c.boot, VerdictWindow); err != nil {
		level.Error(logger).Log("msg", "the flight recorder cannot read the previous boot's last minutes", "err", redact.WithoutPath(err))
	}
	return c, nil
}

// readBootID reads sys/kernel/random/boot_id; zero when it cannot (a fixture
// tree without it).
func readBootID(proc hostfs.FS) [16]byte {
	data, err := proc.ReadFile("sys/kernel/random/boot_id", nil)
	if err != nil {
		return [16]byte{}
	}
	return flight.ParseBootID(data)
}

func (c *flightCollector) start(e *Exporter) {
	if c.ring == nil {
		return
	}
	c.exporter = e
	c.write(false)
	go func() {
		defer close(c.done)
		t := time.NewTicker(c.interval)
		defer t.Stop()
		for {
			select {
			case <-c.stop:
				return
			case <-t.C:
				c.write(false)
			}
		}
	}()
}

// Close writes a last record marked clean (the exporter stops on SIGTERM,
// as at a clean shutdown), syncs and closes the ring.
func (c *flightCollector) Close() error {
	if c.ring == nil {
		return nil
	}
	if c.exporter != nil {
		close(c.stop)
		<-c.done
		c.write(true)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ring.Close()
}

func (c *flightCollector) write(clean bool) {
	e := c.exporter
	// The clean record, written as the collectors close, reads their
	// latest results without running them again.
	if !clean && time.Since(e.At()) > c.interval/2 {
		e.Refresh()
	}
	rec := c.record(e.State())
	rec.Clean = clean
	c.mu.Lock()
	defer c.mu.Unlock()
	err := c.ring.Append(rec)
	if err == nil && (clean || c.interval >= syncEvery || time.Since(c.lastSync) >= syncEvery) {
		err = c.ring.Sync()
		c.lastSync = time.Now()
	}
	if err != nil {
		if c.writeErrors.Add(1) == 1 {
			level.Error(c.logger).Log("msg", "a flight record could not be written; counting in spark_flight_write_errors_total", "err", redact.WithoutPath(err))
		}
		return
	}
	c.records.Add(1)
}

func (c *flightCollector) record(st collected.State) flight.Record {
	rec := flight.Record{Time: time.Now(), Boot: c.boot}
	if p := st.Pool; p != nil {
		usable := p.Snapshot.Usable()
		rec.Pool = &flight.Pool{Free: p.Snapshot.Free, Available: p.Snapshot.Available, Cache: p.Snapshot.PageCache, Usable: &usable}
		if c := p.Snapshot.CMA; c != nil {
			free := c.Free
			rec.Pool.CMAFree = &free
		}
	}
	if data, err := c.proc.ReadFile("pressure/memory", nil); err == nil {
		if p, err := pool.ParsePressure(data); err == nil && p.Some != nil {
			rec.Pressure = &flight.Pressure{Some: *p.Some, Full: p.Full}
		}
	}
	if g := st.GPU; g != nil && len(g.Snapshot.Devices) > 0 {
		d := g.Snapshot.Devices[0]
		value := func(v *float64) float64 {
			if v == nil {
				return math.NaN()
			}
			return *v
		}
		rec.GPU = &flight.GPU{TemperatureCelsius: value(d.TemperatureCelsius), PowerWatts: value(d.PowerWatts), SMClockHertz: value(d.SMClockHertz)}
		if t := st.Thermal; t != nil && len(t.Snapshot.GPUs) > 0 {
			rec.GPU.State = string(t.Snapshot.GPUs[0].Verdict.State)
		}
	}
	if k := st.Kernel; k != nil && k.Readable {
		rec.Kernel = kernelRecord(k.Counts)
	}
	rec.Signs = signs(st)
	if w := st.Workloads; w != nil {
		ws := slices.Clone(w.Workloads)
		slices.SortFunc(ws, func(a, b workload.Workload) int { return cmp.Compare(b.ResidentBytes, a.ResidentBytes) })
		for _, x := range ws[:min(len(ws), flight.MaxWorkloads)] {
			rec.Workloads = append(rec.Workloads, flight.Workload{Role: string(x.Role), Kind: x.Kind, ResidentBytes: x.ResidentBytes})
		}
	}
	return rec
}

// signs are the judgements a record keeps; nil when no part gave one.
func signs(st collected.State) *flight.Signs {
	var sg flight.Signs
	have := false
	if p := st.Pool; p != nil && p.LargeFreeBytes != nil && p.CompactionFailuresPerSecond != nil {
		sg.Fragmented, have = judge.Fragmented(*p.LargeFreeBytes, *p.CompactionFailuresPerSecond), true
	}
	if g := st.GPU; g != nil {
		sg.NVMLStalledSeconds, have = uint64(g.Stalled/time.Second), true
	}
	if k := st.Kernel; k != nil && k.Readable {
		sg.SMMUTimeouts, have = k.Counts.SMMUTimeouts, true
	}
	if !have {
		return nil
	}
	return &sg
}

// kernelRecord keeps the kernel counts, the most frequent Xid codes first.
func kernelRecord(c kmsg.Counts) *flight.Kernel {
	k := &flight.Kernel{OOMGlobal: c.OOMKills[kmsg.Global], OOMCgroup: c.OOMKills[kmsg.Cgroup],
		DriverOutOfMemory: c.DriverOutOfMemory,
		AERCorrected:      c.AER[kmsg.Corrected], AERNonFatal: c.AER[kmsg.NonFatal], AERFatal: c.AER[kmsg.Fatal]}
	for code, n := range c.Xid {
		k.Xid = append(k.Xid, flight.XidCount{Code: code, Count: n})
	}
	slices.SortFunc(k.Xid, func(a, b flight.XidCount) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Code, b.Code))
	})
	k.Xid = k.Xid[:min(len(k.Xid), flight.MaxXid)]
	return k
}

// unclean is the previous boot when it ended without a clean shutdown
// less than uncleanFor ago.
func (c *flightCollector) unclean() *flight.Boot {
	if c.previous == nil || c.previous.Clean() || time.Since(c.previous.End()) >= uncleanFor {
		return nil
	}
	return c.previous
}

// VerdictWindow is the span of the previous boot's end the verdict reads.
const VerdictWindow = 10 * time.Minute

func (c *flightCollector) publish(st *collected.State) {
	f := &collected.Flight{}
	if b := c.unclean(); b != nil {
		f.Unclean, f.EndedAt = true, b.End()
		f.Verdict = flight.Verdict(*b, VerdictWindow, time.Local)
	}
	st.Flight = f
}

// refresh has nothing to read: the previous boot was read at start.
func (c *flightCollector) refresh(ctx context.Context) error { return nil }

func (c *flightCollector) Update(ctx context.Context, ch chan<- prometheus.Metric) error {
	ch <- prometheus.MustNewConstMetric(flightRecordsDesc, prometheus.CounterValue, float64(c.records.Load()))
	ch <- prometheus.MustNewConstMetric(flightErrorsDesc, prometheus.CounterValue, float64(c.writeErrors.Load()))
	ch <- prometheus.MustNewConstMetric(flightUncleanDesc, prometheus.GaugeValue, boolToFloat64(c.unclean() != nil))
	return nil
}
