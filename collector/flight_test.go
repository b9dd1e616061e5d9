package collector

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/spark-exporter/spark_exporter/internal/hostfs"
)

// A flight file that cannot be opened (its directory missing, as a
// read-only or absent disk) stops the recorder, counted, never the
// collector; the previous boot is unknown, so not unclean.
func TestFlightCollectorUnwritable(t *testing.T) {
	c, err := newFlightCollector(filepath.Join(t.TempDir(), "missing", "flight"), 1<<20, time.Second, hostfs.New(fixtures), log.NewNopLogger())
	if err != nil {
		t.Fatal(err)
	}
	e := NewExporter(map[string]Collector{"flight": c}, log.NewNopLogger())
	c.start(e)
	got, err := collect(t, c)
	if err != nil {
		t.Fatal(err)
	}
	if got["spark_flight_write_errors_total"] != 1 || got["spark_flight_records_total"] != 0 || got["spark_flight_last_boot_unclean"] != 0 {
		t.Errorf("got %v", got)
	}
	if err := c.Close(); err != nil {
		t.Error(err)
	}
}

// Two recorders on one file: the second is refused at build, the first
// records on; its Close writes the clean record.
func TestFlightCollectorSecondRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "flight")
	c, err := newFlightCollector(path, 1<<20, time.Hour, hostfs.New(fixtures), log.NewNopLogger())
	if err != nil {
		t.Fatal(err)
	}
	e := NewExporter(map[string]Collector{"flight": c}, log.NewNopLogger())
	c.start(e)
	if _, err := newFlightCollector(path, 1<<20, time.Hour, hostfs.New(fixtures), log.NewNopLogger()); err == nil {
		t.Error("a second recorder on the file was built")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if n := c.records.Load(); n != 2 {
		t.Errorf("%d records, want the first and the clean one", n)
	}
}
