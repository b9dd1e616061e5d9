package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
)

// TestPeerScrapeCost is the built binary's full default scrape against
// node_exporter with only meminfo, vmstat and pressure, on one /proc (100
// processes) and the same client: gzip, with Prometheus 3's OpenMetrics
// Accept header and with the text format's. Rounds interleave the two
// programs; CPU is each one's threads' schedstat. It reports the figures,
// asserting none: SPARK_NODE_EXPORTER=/path/to/node_exporter runs it.
func TestPeerScrapeCost(t *testing.T) {
	peer := os.Getenv("SPARK_NODE_EXPORTER")
	if peer == "" {
		t.Skip("a measure: SPARK_NODE_EXPORTER=/path/to/node_exporter runs it")
	}
	rounds, scrapes := envInt(t, "SPARK_PEER_ROUNDS", 5), envInt(t, "SPARK_PEER_SCRAPES", 100)
	proc := benchProc(t, 100)
	peerPressure(t, proc)
	progs := []program{
		{"spark_exporter", startPeerTarget(t, proc)},
		// The floors: pool alone reads what node_exporter reads; with no
		// collector, only the exporter's own go_* and process_* remain.
		{"spark_exporter, pool only", startPeerTarget(t, proc, noCollectors("pool")...)},
		{"spark_exporter, no collector", startPeerTarget(t, proc, noCollectors()...)},
		{"node_exporter", testexporter.StartProgram(t, peer, nil, "--web.listen-address="+freeAddr(t),
			"--path.procfs="+proc, "--collector.disable-defaults",
			"--collector.meminfo", "--collector.vmstat", "--collector.pressure")},
	}
	for _, f := range []struct{ name, accept string }{
		{"openmetrics", prometheusScrape().Header.Get("Accept")},
		{"text", "text/plain;version=0.0.4"},
	} {
		cost := make([][]time.Duration, len(progs))
		served := make([]string, len(progs))
		for range rounds {
			for i, p := range progs {
				var d time.Duration
				d, served[i] = scrapeCost(t, p.p, f.accept, scrapes)
				cost[i] = append(cost[i], d)
			}
		}
		peerCost := median(cost[len(progs)-1])
		for i, p := range progs {
			t.Logf("%s, %s: %s per scrape, ×%.2f node_exporter's (%s; medians of %d rounds of %d)", f.name, p.name,
				spread(cost[i]), float64(median(cost[i]))/float64(peerCost), served[i], rounds, scrapes)
		}
	}
}

type program struct {
	name string
	p    *testexporter.Process
}

func startPeerTarget(t *testing.T, proc string, args ...string) *testexporter.Process {
	return testexporter.Start(t, testexporter.FrozenAt(t, "gb10-throttle", "45m"), append([]string{
		"--path.procfs=" + proc, "--path.sysfs=" + sysFixture(t, "spark"),
		"--gpu.nvml-library=" + testexporter.StandInNVML(t)}, args...)...)
}

// noCollectors turns off every default collector but keep.
func noCollectors(keep ...string) []string {
	var args []string
	for _, c := range []string{"pool", "gpu", "thermal", "workloads", "platform", "fabric", "kernel", "journal", "engines"} {
		if !slices.Contains(keep, c) {
			args = append(args, "--no-collector."+c)
		}
	}
	return args
}

// peerPressure adds the cpu and io pressure files node_exporter reads
// beside memory's.
func peerPressure(t *testing.T, proc string) {
	data, err := os.ReadFile(filepath.Join(proc, "pressure", "memory"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"cpu", "io"} {
		if err := os.WriteFile(filepath.Join(proc, "pressure", name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// freeAddr is a loopback address free a moment ago, for a program that
// does not say which port it got for :0.
func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// scrapeCost is p's CPU per scrape over n scrapes with accept, after one
// not counted, and the Content-Type served.
func scrapeCost(t *testing.T, p *testexporter.Process, accept string, n int) (time.Duration, string) {
	var served string
	get := func() {
		req, err := http.NewRequest(http.MethodGet, p.URL+"/metrics", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Accept", accept)
		req.Header.Set("Accept-Encoding", "gzip")
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		served = resp.Header.Get("Content-Type")
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Encoding") != "gzip" {
			t.Fatalf("%s: %s, %q", p.URL, resp.Status, resp.Header.Get("Content-Encoding"))
		}
	}
	get()
	start := threadsCPU(t, p.PID())
	for range n {
		get()
	}
	return (threadsCPU(t, p.PID()) - start) / time.Duration(n), served
}

func median(ds []time.Duration) time.Duration {
	s := slices.Sorted(slices.Values(ds))
	return s[len(s)/2]
}

func spread(ds []time.Duration) string {
	return fmt.Sprintf("%v (%v–%v)", median(ds).Round(time.Microsecond),
		slices.Min(ds).Round(time.Microsecond), slices.Max(ds).Round(time.Microsecond))
}
