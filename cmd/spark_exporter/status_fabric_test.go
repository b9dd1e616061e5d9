package main

import (
	"encoding/json"
	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/go-kit/log"

	"github.com/spark-exporter/spark_exporter/collector"
	"github.com/spark-exporter/spark_exporter/internal/gpu"
	"github.com/spark-exporter/spark_exporter/internal/status"
)

// The fabric line of the status page, from the scrapes of a Spark joined to
// another: after one scrape the traffic is not yet measured (no made-up
// 0); after a second, it is the bytes counted between them, as /metrics'
// counters say. A Spark without RDMA devices has no line.
func TestStatusFabricLine(t *testing.T) {
	serve := func(sys string) http.Handler {
		app := kingpin.New(name, "")
		selection := collector.AddFlags(app)
		if _, err := app.Parse([]string{"--no-collector.gpu", "--no-collector.thermal"}); err != nil {
			t.Fatal(err)
		}
		exporter, closeCollectors, err := buildExporter(selection, gpu.Settings{},
			collector.Env{ProcFS: fixtureDir(t, "spark"), SysFS: sys, Logger: log.NewNopLogger()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(closeCollectors)
		mux := http.NewServeMux()
		mux.Handle("/metrics", newMetricsHandler(exporter, false, 4, log.NewNopLogger()))
		// A state of any age is shown: the page never runs the
		// collectors once a scrape has.
		for pattern, h := range statusRoutes(exporter, "/metrics", time.Hour) {
			mux.Handle(pattern, h)
		}
		return mux
	}
	lone := serve(sysFixture(t, "spark"))
	get(lone, "/metrics")
	if body := get(lone, status.APIPath).Body.String(); !strings.Contains(body, `"fabric":null`) {
		t.Errorf("a fabric line without RDMA devices:\n%s", body)
	}

	sys := t.TempDir()
	if err := os.CopyFS(sys, os.DirFS(sysFixture(t, "spark-fabric"))); err != nil {
		t.Fatal(err)
	}
	mux := serve(sys)
	model := func() status.Model {
		t.Helper()
		var m status.Model
		if err := json.Unmarshal(get(mux, status.APIPath).Body.Bytes(), &m); err != nil || m.Fabric == nil {
			t.Fatalf("status: %v %+v", err, m.Fabric)
		}
		return m
	}
	const rcv = `spark_fabric_receive_bytes_total{device="rocep1s0f0",port="1"}`
	before, _ := testexporter.Value(get(mux, "/metrics").Body.String(), rcv)
	m := model()
	if f := m.Fabric; f.TrafficBytesPerSecond != nil || f.Text != "2 of 4 functions up, 400 Gb/s negotiated, traffic not yet measured; PCIe x4 at 32 GT/s" {
		t.Errorf("after one scrape: %+v", f)
	}
	// 250,000,000 more 32-bit words received: 1 GB.
	name := filepath.Join(sys, "class/infiniband/rocep1s0f0/ports/1/counters/port_rcv_data")
	if err := os.WriteFile(name, []byte("3114127401\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	after, _ := testexporter.Value(get(mux, "/metrics").Body.String(), rcv)
	if after-before != 1e9 {
		t.Fatalf("/metrics counted %v bytes, want 1e9", after-before)
	}
	if f := model().Fabric; f.TrafficBytesPerSecond == nil || *f.TrafficBytesPerSecond <= 0 || !strings.Contains(f.Text, "carrying ") {
		t.Errorf("after two scrapes: %+v", f)
	}
}
