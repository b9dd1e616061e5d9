// Package recorder is the flight recorder: every interval it writes one
// record of what the collectors' latest complete collection found (pool and
// memory pressure, largest workloads, GPU, kernel log counts) into a
// fixed-size ring on disk (internal/flight), so that after a wedge and a
// power cycle `spark_exporter report --flight` shows the minutes before.
//
// It never runs a collector. When the latest collection is older than the
// interval (nobody scraping, or scraping slower), it reads the pool and the
// memory pressure afresh through internal/pool, as the pool collector does,
// and takes the rest from that collection. It writes none before the first.
package recorder

import (
	"cmp"
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

	"github.com/spark-exporter/spark_exporter/internal/collected"
	"github.com/spark-exporter/spark_exporter/internal/flight"
	"github.com/spark-exporter/spark_exporter/internal/hostfs"
	"github.com/spark-exporter/spark_exporter/internal/judge"
	"github.com/spark-exporter/spark_exporter/internal/kmsg"
	"github.com/spark-exporter/spark_exporter/internal/pool"
	"github.com/spark-exporter/spark_exporter/internal/redact"
	"github.com/spark-exporter/spark_exporter/internal/workload"
)

var (
	recordsDesc = prometheus.NewDesc("spark_flight_records_total", "Records the flight recorder wrote.", nil, nil)
	errorsDesc  = prometheus.NewDesc("spark_flight_write_errors_total",
		"Flight records that could not be written or synced (a full or read-only disk); the scrape is unaffected.", nil, nil)
	uncleanDesc = prometheus.NewDesc("spark_flight_last_boot_unclean",
		"1 when the flight recorder found that the previous boot ended without a clean shutdown, for a day after its end; else 0.", nil, nil)
)

// syncEvery bounds how often records are made durable: each is synced when
// the interval is at least this, so that the newest durable record before a
// power cut is one interval old, at one 4 KiB page write a record (about 70 MB
// a day at 5 s: far inside an NVMe drive's endurance).
const syncEvery = time.Second

// uncleanFor is how long after the previous boot's end it is reported.
const uncleanFor = 24 * time.Hour

// verdictWindow is the span of the previous boot's end the verdict reads.
const verdictWindow = 10 * time.Minute

// Recorder writes the flight ring; it is a prometheus.Collector of its own
// counters.
type Recorder struct {
	ring     *flight.Ring // nil: the file could not be opened
	interval time.Duration
	results  *collected.Results
	proc     hostfs.FS // read afresh between collections
	logger   log.Logger
	boot     [16]byte

	records, writeErrors atomic.Uint64
	previous             *flight.Boot // the boot before this one, if recorded

	// readFailing: the latest fresh read of the pool failed (logged once).
	readFailing bool

	mu       sync.Mutex // serialises the ring's writes
	lastSync time.Time

	life          sync.Mutex // orders begin and Close
	began, closed bool
	stop, done    chan struct{}
}

// Open opens the ring at path; Start records results every interval.
// A file another recorder holds is an error; one that cannot be opened
// (a read-only or full disk) stops the recorder, counted, never the exporter.
func Open(path string, size uint64, interval time.Duration, boot [16]byte, results *collected.Results, proc hostfs.FS, logger log.Logger) (*Recorder, error) {
	r := &Recorder{interval: interval, results: results, proc: proc, logger: logger, boot: boot,
		stop: make(chan struct{}), done: make(chan struct{})}
	// A record before the first collection would hold nothing.
	ring, err := flight.Open(path, size)
	switch {
	case errors.Is(err, flight.ErrLocked):
		return nil, fmt.Errorf("--flight.file: %w", err)
	case err != nil:
		// The path is not logged.
		r.writeErrors.Add(1)
		level.Error(logger).Log("msg", "the flight recorder cannot open its file; recording nothing", "err", redact.WithoutPath(err))
		return r, nil
	}
	r.ring = ring
	if r.previous, err = ring.Previous(boot, verdictWindow); err != nil {
		level.Error(logger).Log("msg", "the flight recorder cannot read the previous boot's last minutes", "err", redact.WithoutPath(err))
	}
	return r, nil
}

// Start records from the end of the first collection on, until Close.
func (r *Recorder) Start() {
	if r.ring != nil {
		r.results.AfterFirst(r.begin)
	}
}

// begin writes the first record and starts the clock.
func (r *Recorder) begin() {
	r.life.Lock()
	defer r.life.Unlock()
	if r.closed {
		return
	}
	r.began = true
	r.write(false)
	go r.loop()
}

func (r *Recorder) loop() {
	defer close(r.done)
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
			r.write(false)
		}
	}
}

// Close writes a last record marked clean (the exporter stops on SIGTERM,
// as at a clean shutdown), syncs and closes the ring.
func (r *Recorder) Close() error {
	if r.ring == nil {
		return nil
	}
	r.life.Lock()
	r.closed = true
	if r.began {
		close(r.stop)
		<-r.done
	}
	r.life.Unlock()
	r.write(true)
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ring.Close()
}

func (r *Recorder) write(clean bool) {
	st := r.results.Parts()
	if time.Since(st.At) >= r.interval {
		st.Pool = r.freshPool(st.Pool)
	}
	rec := r.record(st)
	rec.Clean = clean
	r.mu.Lock()
	defer r.mu.Unlock()
	err := r.ring.Append(rec)
	if err == nil && (clean || r.interval >= syncEvery || time.Since(r.lastSync) >= syncEvery) {
		err = r.ring.Sync()
		r.lastSync = time.Now()
	}
	if err != nil {
		if r.writeErrors.Add(1) == 1 {
			level.Error(r.logger).Log("msg", "a flight record could not be written; counting in spark_flight_write_errors_total", "err", redact.WithoutPath(err))
		}
		return
	}
	r.records.Add(1)
}

// freshPool is last with the pool and its pressure read now, under the
// read deadline; nil when they cannot be read, as a failed collection.
func (r *Recorder) freshPool(last *collected.Pool) *collected.Pool {
	var m pool.Memory
	err := r.proc.Batch(func(rd *hostfs.Reader) error {
		var err error
		m, err = pool.ReadMemory(rd)
		return err
	})
	if err != nil {
		if !r.readFailing {
			level.Warn(r.logger).Log("msg", "the flight recorder cannot read the pool; its records hold none until it can", "err", redact.WithoutPath(err))
		}
		r.readFailing = true
		return nil
	}
	r.readFailing = false
	if last == nil {
		return collected.PoolOf(m, 0)
	}
	p := collected.PoolOf(m, last.Reserve)
	p.LargeFreeBytes, p.CompactionFailuresPerSecond = last.LargeFreeBytes, last.CompactionFailuresPerSecond
	return p
}

func (r *Recorder) record(st collected.State) flight.Record {
	rec := flight.Record{Time: time.Now(), Boot: r.boot}
	if p := st.Pool; p != nil {
		usable := p.Snapshot.Usable()
		rec.Pool = &flight.Pool{Free: p.Snapshot.Free, Available: p.Snapshot.Available, Cache: p.Snapshot.PageCache, Usable: &usable}
		if c := p.Snapshot.CMA; c != nil {
			free := c.Free
			rec.Pool.CMAFree = &free
		}
		if ps := p.Pressure; ps != nil && ps.Some != nil {
			rec.Pressure = &flight.Pressure{Some: *ps.Some, Full: ps.Full}
		}
	}
	rec.GPU = gpuRecord(st)
	rec.Signs = signs(st)
	if k := st.Kernel; k != nil && k.Readable {
		rec.Kernel = kernelRecord(k.Counts)
	}
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

func gpuRecord(st collected.State) *flight.GPU {
	g := st.GPU
	if g == nil || len(g.Snapshot.Devices) == 0 {
		return nil
	}
	d := g.Snapshot.Devices[0]
	value := func(v *float64) float64 {
		if v == nil {
			return math.NaN()
		}
		return *v
	}
	rec := &flight.GPU{TemperatureCelsius: value(d.TemperatureCelsius), PowerWatts: value(d.PowerWatts), SMClockHertz: value(d.SMClockHertz)}
	if t := st.Thermal; t != nil && len(t.Snapshot.GPUs) > 0 {
		rec.State = string(t.Snapshot.GPUs[0].Verdict.State)
	}
	return rec
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
func (r *Recorder) unclean() *flight.Boot {
	if r.previous == nil || r.previous.Clean() || time.Since(r.previous.End()) >= uncleanFor {
		return nil
	}
	return r.previous
}

// Account is the recorder's account of the previous boot, for the views.
func (r *Recorder) Account() *collected.Flight {
	f := &collected.Flight{}
	if b := r.unclean(); b != nil {
		f.Unclean, f.EndedAt = true, b.End()
		f.Verdict = flight.Verdict(*b, verdictWindow, time.Local)
	}
	return f
}

// Describe sends the recorder's descriptors.
func (r *Recorder) Describe(ch chan<- *prometheus.Desc) {
	ch <- recordsDesc
	ch <- errorsDesc
	ch <- uncleanDesc
}

// Collect sends the recorder's counters and the previous boot's verdict.
func (r *Recorder) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(recordsDesc, prometheus.CounterValue, float64(r.records.Load()))
	ch <- prometheus.MustNewConstMetric(errorsDesc, prometheus.CounterValue, float64(r.writeErrors.Load()))
	unclean := 0.0
	if r.unclean() != nil {
		unclean = 1
	}
	ch <- prometheus.MustNewConstMetric(uncleanDesc, prometheus.GaugeValue, unclean)
}
