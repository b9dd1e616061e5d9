package collector

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/spark-exporter/spark_exporter/internal/gpu"
	"github.com/spark-exporter/spark_exporter/internal/gpu/readings"
	"github.com/spark-exporter/spark_exporter/internal/hostfs"
)

// fixtures is the /proc tree of a DGX Spark mid-run, shared with the golden
// end-to-end test.
const fixtures = "../testdata/proc/spark"

// sample renders one metric as name{label="value",...}, labels sorted.
func sample(m prometheus.Metric) (string, float64) {
	var pb dto.Metric
	if err := m.Write(&pb); err != nil {
		panic(err)
	}
	var labels []string
	for _, l := range pb.GetLabel() {
		labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
	}
	sort.Strings(labels)
	name := m.Desc().String()
	// Desc.String() is `Desc{fqName: "spark_x", ...}`: take the name.
	name = name[strings.Index(name, `"`)+1:]
	name = name[:strings.Index(name, `"`)]
	if len(labels) > 0 {
		name += "{" + strings.Join(labels, ",") + "}"
	}
	switch {
	case pb.Gauge != nil:
		return name, pb.GetGauge().GetValue()
	case pb.Counter != nil:
		return name, pb.GetCounter().GetValue()
	default:
		return name, pb.GetUntyped().GetValue()
	}
}

// collect runs one Update and returns its samples but the entry cap's
// (a registry series, the same for every collector), failing the test on a
// repeated series.
func collect(t *testing.T, c Collector) (map[string]float64, error) {
	t.Helper()
	return collectWithin(t, c, 0)
}

// collectWithin is collect under the deadline the registry gives a run of
// the collector: timeout (hostfs.DefaultTimeout when 0).
func collectWithin(t *testing.T, c Collector, timeout time.Duration) (map[string]float64, error) {
	t.Helper()
	ctx, cancel := hostfs.RunContext(t.Context(), timeout)
	defer cancel()
	ch := make(chan prometheus.Metric)
	done := make(chan error, 1)
	go func() {
		err := c.Update(ctx, ch)
		close(ch)
		done <- err
	}()
	got := map[string]float64{}
	for m := range ch {
		name, v := sample(m)
		if _, dup := got[name]; dup {
			t.Errorf("series %s sent twice", name)
		}
		if !strings.HasPrefix(name, "spark_scrape_collector_entries_left_out{") {
			got[name] = v
		}
	}
	return got, <-done
}

// gatherAll runs a prometheus.Collector as a registry would.
func gatherAll(t *testing.T, c prometheus.Collector) map[string]float64 {
	t.Helper()
	ch := make(chan prometheus.Metric)
	go func() { c.Collect(ch); close(ch) }()
	got := map[string]float64{}
	for m := range ch {
		name, v := sample(m)
		got[name] = v
	}
	return got
}

func nopLogger() log.Logger { return log.NewNopLogger() }

// fakeNVML stands for the process's NVML client: it serves readings (or
// err), counts the reads, and notes what each asked for.
type fakeNVML struct {
	mu       sync.Mutex
	readings []readings.Reading
	err      error
	reads    int           // Read calls
	recents  int           // Recent calls
	maxAge   time.Duration // of the latest Recent
	deadline time.Duration // time left to the latest Read, from its start
	readDone chan struct{} // if set, told of each Read
}

func (f *fakeNVML) Read(ctx context.Context) ([]readings.Reading, error) {
	f.mu.Lock()
	f.reads++
	if d, ok := ctx.Deadline(); ok {
		f.deadline = time.Until(d)
	}
	readings, err, done := f.readings, f.err, f.readDone
	f.mu.Unlock()
	if done != nil {
		done <- struct{}{}
	}
	return readings, err
}

func (f *fakeNVML) Stalled() time.Duration { return 0 }

func (f *fakeNVML) Recent(_ context.Context, maxAge time.Duration) (readings.Snapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.recents++
	f.maxAge = maxAge
	return readings.Snapshot{Devices: f.readings}, f.err
}

// testEnv is the Env of a host without NVML, on the spark fixture /proc.
func testEnv() Env {
	return Env{ProcFS: fixtures, Logger: nopLogger(), NVML: &fakeNVML{err: gpu.ErrUnavailable},
		GPU: gpu.Settings{Timeout: time.Second, MaxAge: gpu.DefaultMaxAge}}
}
