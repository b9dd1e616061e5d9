package collector

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/go-kit/log"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
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

// collect runs one Update and returns its samples, failing the test on a
// repeated series.
func collect(t *testing.T, c Collector) (map[string]float64, error) {
	t.Helper()
	ch := make(chan prometheus.Metric)
	done := make(chan error, 1)
	go func() {
		err := c.Update(ch)
		close(ch)
		done <- err
	}()
	got := map[string]float64{}
	for m := range ch {
		name, v := sample(m)
		if _, dup := got[name]; dup {
			t.Errorf("series %s sent twice", name)
		}
		got[name] = v
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
