package recorder

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/spark-exporter/spark_exporter/internal/collected"
	"github.com/spark-exporter/spark_exporter/internal/flight"
	"github.com/spark-exporter/spark_exporter/internal/hostfs"
	"github.com/spark-exporter/spark_exporter/internal/pool"
)

// A flight file that cannot be opened (its directory missing, as a
// read-only or absent disk) stops the recorder, counted, never the
// exporter; the previous boot is unknown, so not unclean.
func TestRecorderUnwritable(t *testing.T) {
	r, err := Open(filepath.Join(t.TempDir(), "missing", "flight"), 1<<20, time.Second, [16]byte{}, &collected.Results{}, hostfs.New(t.TempDir()), log.NewNopLogger())
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(r)
	for name, want := range map[string]float64{"spark_flight_write_errors_total": 1, "spark_flight_records_total": 0, "spark_flight_last_boot_unclean": 0} {
		if got := value(t, reg, name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if err := r.Close(); err != nil {
		t.Error(err)
	}
}

// Two recorders on one file: the second is refused, the first records on
// once a collection has ended; its Close writes the clean record.
func TestRecorderSecondRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "flight")
	results := &collected.Results{}
	r, err := Open(path, 1<<20, time.Hour, [16]byte{}, results, hostfs.New(t.TempDir()), log.NewNopLogger())
	if err != nil {
		t.Fatal(err)
	}
	r.Start()
	results.Complete(time.Now())
	if _, err := Open(path, 1<<20, time.Hour, [16]byte{}, results, hostfs.New(t.TempDir()), log.NewNopLogger()); err == nil {
		t.Error("a second recorder on the file was opened")
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if n := r.records.Load(); n != 2 {
		t.Errorf("%d records, want the first and the clean one", n)
	}
}

func value(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no %s", name)
	return 0
}

// With nobody scraping, each record reads the pool and the memory pressure
// afresh: successive records follow /proc/meminfo, not the last collection.
func TestRecorderReadsPoolBetweenCollections(t *testing.T) {
	proc := t.TempDir()
	results := lastCollection(time.Now().Add(-time.Minute))
	path := filepath.Join(t.TempDir(), "flight")
	r, err := Open(path, 1<<20, time.Second, [16]byte{1}, results, hostfs.New(proc), log.NewNopLogger())
	if err != nil {
		t.Fatal(err)
	}
	frees := []uint64{10 << 20, 20 << 20, 30 << 20}
	for _, free := range frees {
		writeMemory(t, proc, free)
		r.write(false)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	recs := readRecords(t, path)
	if len(recs) != len(frees)+1 {
		t.Fatalf("%d records, want %d", len(recs), len(frees)+1)
	}
	for i, rec := range recs {
		want := frees[min(i, len(frees)-1)]
		if rec.Pool == nil || rec.Pool.Free != want || rec.Pressure == nil || rec.Pressure.Some != want/1024 {
			t.Errorf("record %d: pool %+v, pressure %+v; want free %d, some %d", i, rec.Pool, rec.Pressure, want, want/1024)
		}
		if rec.Signs == nil || !rec.Signs.Fragmented {
			t.Errorf("record %d: signs %+v, want the last collection's fragmentation", i, rec.Signs)
		}
	}
}

// A collection within the interval is taken as it is: /proc is not read.
func TestRecorderTakesRecentCollection(t *testing.T) {
	proc := t.TempDir()
	writeMemory(t, proc, 10<<20)
	path := filepath.Join(t.TempDir(), "flight")
	r, err := Open(path, 1<<20, time.Hour, [16]byte{1}, lastCollection(time.Now()), hostfs.New(proc), log.NewNopLogger())
	if err != nil {
		t.Fatal(err)
	}
	r.write(false)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	for i, rec := range readRecords(t, path) {
		if rec.Pool == nil || rec.Pool.Free != 1 {
			t.Errorf("record %d: pool %+v, want the collection's", i, rec.Pool)
		}
	}
}

// lastCollection is a collection ended at at whose pool, free 1 byte, is
// fragmented.
func lastCollection(at time.Time) *collected.Results {
	large, fails := 0.0, 1.0
	results := &collected.Results{}
	results.Set(func(st *collected.State) {
		st.Pool = &collected.Pool{Snapshot: pool.Snapshot{Free: 1, Available: 1}, LargeFreeBytes: &large, CompactionFailuresPerSecond: &fails}
	})
	results.Complete(at)
	return results
}

// writeMemory writes a meminfo with MemFree free and a pressure whose
// "some" total is free/1024.
func writeMemory(t *testing.T, proc string, free uint64) {
	t.Helper()
	kib := free / 1024
	meminfo := fmt.Sprintf("MemTotal: %d kB\nMemFree: %d kB\nMemAvailable: %d kB\nBuffers: 0 kB\nCached: 0 kB\n"+
		"SReclaimable: 0 kB\nShmem: 0 kB\nMapped: 0 kB\n", 2*kib, kib, kib)
	psi := fmt.Sprintf("some avg10=0.00 avg60=0.00 avg300=0.00 total=%d\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n", kib)
	if err := os.MkdirAll(filepath.Join(proc, "pressure"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{"meminfo": meminfo, "pressure/memory": psi} {
		if err := os.WriteFile(filepath.Join(proc, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func readRecords(t *testing.T, path string) []flight.Record {
	t.Helper()
	f, err := flight.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var recs []flight.Record
	for _, b := range f.Boots() {
		if err := f.Each(b, func(time.Time) bool { return true }, func(r flight.Record) { recs = append(recs, r) }); err != nil {
			t.Fatal(err)
		}
	}
	return recs
}

// A pool that cannot be read afresh is left out of the record, not taken
// stale from the last collection; the record is still written.
func TestRecorderUnreadablePool(t *testing.T) {
	path := filepath.Join(t.TempDir(), "flight")
	r, err := Open(path, 1<<20, time.Second, [16]byte{1}, lastCollection(time.Now().Add(-time.Minute)), hostfs.New(t.TempDir()), log.NewNopLogger())
	if err != nil {
		t.Fatal(err)
	}
	r.write(false)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	recs := readRecords(t, path)
	if len(recs) != 2 {
		t.Fatalf("%d records, want 2", len(recs))
	}
	for i, rec := range recs {
		if rec.Pool != nil || rec.Pressure != nil {
			t.Errorf("record %d: pool %+v, pressure %+v; want none", i, rec.Pool, rec.Pressure)
		}
	}
}
