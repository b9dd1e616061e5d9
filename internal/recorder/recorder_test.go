package recorder

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/spark-exporter/spark_exporter/internal/collected"
)

// A flight file that cannot be opened (its directory missing, as a
// read-only or absent disk) stops the recorder, counted, never the
// exporter; the previous boot is unknown, so not unclean.
func TestRecorderUnwritable(t *testing.T) {
	r, err := Open(filepath.Join(t.TempDir(), "missing", "flight"), 1<<20, time.Second, [16]byte{}, &collected.Results{}, log.NewNopLogger())
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
	r, err := Open(path, 1<<20, time.Hour, [16]byte{}, results, log.NewNopLogger())
	if err != nil {
		t.Fatal(err)
	}
	r.Start()
	results.Complete(time.Now())
	if _, err := Open(path, 1<<20, time.Hour, [16]byte{}, results, log.NewNopLogger()); err == nil {
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
