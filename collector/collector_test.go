package collector

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/alecthomas/kingpin/v2"
	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/spark-exporter/spark_exporter/internal/hostfs"
	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
)

var fakeDesc = prometheus.NewDesc("spark_fake_value", "A test value.", []string{"from"}, nil)

// fake reports one value, or fails while err is set.
type fake struct {
	mu  sync.Mutex
	err error
}

func (f *fake) set(err error) { f.mu.Lock(); f.err = err; f.mu.Unlock() }

func (f *fake) Update(_ context.Context, ch chan<- prometheus.Metric) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	ch <- prometheus.MustNewConstMetric(fakeDesc, prometheus.GaugeValue, 1, "fake")
	return nil
}

func TestFailingCollectorDoesNotHideOthers(t *testing.T) {
	broken := &fake{err: errors.New("cannot read /proc/x")}
	e := NewExporter(map[string]Collector{"good": &fake{}, "broken": broken, "empty": noData{}}, nil, nopLogger())
	got := gatherAll(t, e)
	for name, want := range map[string]float64{
		`spark_scrape_collector_success{collector="good"}`:   1,
		`spark_scrape_collector_success{collector="broken"}`: 0,
		`spark_scrape_collector_success{collector="empty"}`:  1, // no data is not a failure
		`spark_fake_value{from="fake"}`:                      1,
	} {
		if v, ok := got[name]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", name, v, ok, want)
		}
	}
	for _, c := range []string{"good", "broken", "empty"} {
		if _, ok := got[`spark_scrape_collector_duration_seconds{collector="`+c+`"}`]; !ok {
			t.Errorf("no duration for %s", c)
		}
	}
}

type noData struct{}

func (noData) Update(context.Context, chan<- prometheus.Metric) error { return errNoData }

func TestFailureLoggedWhenItStartsAndClears(t *testing.T) {
	var buf bytes.Buffer
	broken := &fake{err: errors.New("boom")}
	e := NewExporter(map[string]Collector{"broken": broken}, nil, log.NewLogfmtLogger(&buf))
	for range 5 {
		gatherAll(t, e)
	}
	broken.set(nil)
	for range 3 {
		gatherAll(t, e)
	}
	broken.set(errors.New("boom again"))
	gatherAll(t, e)

	out := buf.String()
	// go-kit's level wrappers are absent from a plain logger, so count the
	// messages themselves: 5 failing scrapes log one error; the rest are
	// debug lines with their own message.
	if n := strings.Count(out, "msg=\"collector failed;"); n != 2 {
		t.Errorf("failure logged %d times, want 2 (once per outage):\n%s", n, out)
	}
	if n := strings.Count(out, "msg=\"collector recovered\""); n != 1 {
		t.Errorf("recovery logged %d times, want 1:\n%s", n, out)
	}
	if !strings.Contains(out, "err=\"boom again\"") {
		t.Errorf("second outage's error not logged:\n%s", out)
	}
}

func TestFilter(t *testing.T) {
	e := NewExporter(map[string]Collector{"a": &fake{}, "b": &fake{}, "c": &fake{}}, nil, nopLogger())
	for _, tc := range []struct {
		include, exclude, want []string
	}{
		{[]string{"a"}, nil, []string{"a"}},
		{nil, []string{"a"}, []string{"b", "c"}},
		{[]string{"a", "b"}, []string{"b"}, []string{"a"}},
	} {
		f, err := e.Filter(tc.include, tc.exclude)
		if err != nil {
			t.Fatal(err)
		}
		got := gatherAll(t, f)
		var ran []string
		for _, c := range []string{"a", "b", "c"} {
			if _, ok := got[`spark_scrape_collector_success{collector="`+c+`"}`]; ok {
				ran = append(ran, c)
			}
		}
		if strings.Join(ran, ",") != strings.Join(tc.want, ",") {
			t.Errorf("include %v exclude %v ran %v, want %v", tc.include, tc.exclude, ran, tc.want)
		}
	}
	if _, err := e.Filter([]string{"nope"}, nil); err == nil {
		t.Error("unknown collector accepted")
	}
}

func TestSelectionFlags(t *testing.T) {
	parse := func(args ...string) []string {
		app := kingpin.New("t", "")
		s := AddFlags(app)
		if _, err := app.Parse(args); err != nil {
			t.Fatal(err)
		}
		return s.Enabled()
	}
	if got := parse(); !contains(got, "pool") {
		t.Errorf("pool not enabled by default: %v", got)
	}
	if got := parse("--no-collector.pool"); contains(got, "pool") {
		t.Errorf("--no-collector.pool left it enabled: %v", got)
	}
}

func TestBuildPassesFlags(t *testing.T) {
	app := kingpin.New("t", "")
	s := AddFlags(app)
	if _, err := app.Parse([]string{"--pool.reserve=8GiB"}); err != nil {
		t.Fatal(err)
	}
	e, err := s.Build(testEnv())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	f, err := e.Filter([]string{"pool"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v := gatherAll(t, f)["spark_pool_reserve_bytes"]; v != 8*gib {
		t.Errorf("reserve = %v, want 8 GiB", v)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// A collector's error quotes the file it failed on; the log names it under
// --path.procfs, never with the mount point, which may be a private path.
func TestFailureLogNamesNoProcfsPath(t *testing.T) {
	dir := testexporter.CopyTree(t, fixtures)
	if err := os.Remove(filepath.Join(dir, "vmstat")); err != nil {
		t.Fatal(err)
	}
	c, err := newPoolCollector(hostfs.New(dir), 4*gib, nopLogger())
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	e := NewExporter(map[string]Collector{"pool": c}, nil, log.NewLogfmtLogger(&buf))
	e.procfs = dir
	for range 2 { // the error, then the debug line
		gatherAll(t, e)
	}
	out := buf.String()
	if strings.Contains(out, dir) {
		t.Errorf("the log names --path.procfs:\n%s", out)
	}
	if strings.Count(out, "open vmstat: no such file or directory") != 2 {
		t.Errorf("the log does not say which file failed, twice:\n%s", out)
	}
}
