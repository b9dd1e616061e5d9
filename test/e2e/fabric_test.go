//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
)

// Two Sparks joined by their ConnectX-7, in one Prometheus with the shipped
// rules: spark-a healthy (testdata/sys/spark-fabric: the first port's two
// functions up, the second port without a cable), spark-b degraded
// (testdata/sys/spark-fabric-degraded: rocep1s0f0 trained at PCIe x2, and
// roceP2p1s0f0, which this test brings up first and then takes down, since
// SparkFabricLinkDown pages only for a port seen up). spark-b pages for
// both; spark-a pages for nothing, nor do the ports that never had a cable;
// every fabric series and the throughput recording rule answer for both
// Sparks, each with its own devices.
//
// Counters stand still in a fixture tree, so the rail imbalance and error
// alerts, which need traffic and growing counters, are judged in
// rules/tests/fabric.test.yml, not here.
func TestTwoSparksFabric(t *testing.T) {
	root := testexporter.Root(t)
	healthy := copySys(t, filepath.Join(root, "testdata", "sys", "spark-fabric"))
	degraded := copySys(t, filepath.Join(root, "testdata", "sys", "spark-fabric-degraded"))
	lost := filepath.Join(degraded, "class", "infiniband", "roceP2p1s0f0", "ports", "1")
	downState, err := os.ReadFile(filepath.Join(lost, "state"))
	if err != nil {
		t.Fatal(err)
	}
	downPhys, err := os.ReadFile(filepath.Join(lost, "phys_state"))
	if err != nil {
		t.Fatal(err)
	}
	writeSysfs(t, filepath.Join(lost, "state"), []byte("4: ACTIVE\n"))
	writeSysfs(t, filepath.Join(lost, "phys_state"), []byte("5: LinkUp\n"))

	s := startStack(t, []target{
		{instance: "spark-a", procfs: idleTree(t, root), nvml: "gb10-idle", sysfs: healthy},
		{instance: "spark-b", procfs: idleTree(t, root), nvml: "gb10-idle", sysfs: degraded},
	})
	runbooks := s.runbooks(t, due(s.ready, scrapeInterval), root)

	// The link as Prometheus saw it up, then lost.
	s.waitFor(t, due(s.ready, scrapeInterval), `spark_fabric_link_up{instance="spark-b",device="roceP2p1s0f0"} == 1`,
		"Prometheus to see spark-b's roceP2p1s0f0 up")
	writeSysfs(t, filepath.Join(lost, "phys_state"), downPhys)
	writeSysfs(t, filepath.Join(lost, "state"), downState)
	lostAt := time.Now()

	t.Run("LinkDown", func(t *testing.T) {
		// Due within its `for:` (its day-long window only looks back).
		a := s.waitPage(t, due(lostAt, s.forOf(t, "SparkFabricLinkDown")+scrapeInterval), map[string]string{
			"alertname": "SparkFabricLinkDown", "instance": "spark-b", "job": "spark", "severity": "warning",
			"device": "roceP2p1s0f0", "port": "1",
		})
		runbooks.check(t, a, "sparkfabriclinkdown")
	})
	t.Run("PCIeDegraded", func(t *testing.T) {
		a := s.waitPage(t, due(s.ready, s.firesWithin("SparkFabricPCIeDegraded")), map[string]string{
			"alertname": "SparkFabricPCIeDegraded", "instance": "spark-b", "job": "spark", "severity": "warning",
			"device": "rocep1s0f0", "link": "width",
		})
		runbooks.check(t, a, "sparkfabricpciedegraded")
		matches(t, a.Annotations["description"], `below its maximum width \(2 now\)`)
	})

	// By now spark-a has been scraped as long as spark-b, past every
	// shortened `for:` of the two alerts that paged: its silence is an
	// answer. Neither is a never-cabled port paged on either Spark.
	t.Run("HealthyAndUncabledStaySilent", func(t *testing.T) {
		pending, err := s.query(`ALERTS{alertname=~"SparkFabric.*",instance="spark-a"}`)
		if err != nil {
			t.Fatal(err)
		}
		if len(pending) > 0 {
			t.Errorf("the healthy Spark has fabric alerts: %v", pending)
		}
		for _, a := range s.hooks.find("page", "firing", map[string]string{}) {
			if !strings.HasPrefix(a.Labels["alertname"], "SparkFabric") {
				continue
			}
			if a.Labels["instance"] == "spark-a" || strings.HasSuffix(a.Labels["device"], "f1") {
				t.Errorf("paged: %v", a.Labels)
			}
		}
		uncabled, err := s.query(`ALERTS{alertname="SparkFabricLinkDown",device=~".*f1"}`)
		if err != nil {
			t.Fatal(err)
		}
		if len(uncabled) > 0 {
			t.Errorf("a port that never had a cable is alerted on: %v", uncabled)
		}
	})

	// Every fabric series, and the recording rule, answer for both Sparks,
	// each with its own four functions; what the status line would say
	// (functions up) differs as the trees do.
	t.Run("BothSparksUnmixed", func(t *testing.T) {
		for _, metric := range []string{
			"spark_fabric_info", "spark_fabric_link_up", "spark_fabric_pcie_link_width",
			"spark_fabric_pcie_link_transfers_per_second", "spark_fabric_receive_bytes_total",
			"spark_fabric_transmit_bytes_total", "spark_fabric_port_errors_total",
			"spark_fabric_roce_events_total", "instance_device:spark_fabric_bytes:rate5m",
		} {
			r, err := s.query(fmt.Sprintf(`count by (instance) (count by (instance, device) (%s))`, metric))
			if err != nil {
				t.Fatalf("%s: %v", metric, err)
			}
			got := map[string]float64{}
			for _, x := range r {
				got[x.Metric["instance"]] = x.Value
			}
			if len(got) != 2 || got["spark-a"] != 4 || got["spark-b"] != 4 {
				t.Errorf("%s: devices by instance %v, want 4 on spark-a and 4 on spark-b", metric, got)
			}
		}
		r, err := s.query(`sum by (instance) (spark_fabric_link_up)`)
		if err != nil {
			t.Fatal(err)
		}
		up := map[string]float64{}
		for _, x := range r {
			up[x.Metric["instance"]] = x.Value
		}
		if up["spark-a"] != 2 || up["spark-b"] != 1 {
			t.Errorf("functions up by instance %v, want 2 on spark-a (one cable) and 1 on spark-b", up)
		}
		r, err = s.query(`spark_fabric_link_rate_bits_per_second`)
		if err != nil {
			t.Fatal(err)
		}
		var rates []string
		for _, x := range r {
			rates = append(rates, x.Metric["instance"]+"/"+x.Metric["device"])
		}
		slices.Sort(rates)
		if want := []string{"spark-a/roceP2p1s0f0", "spark-a/rocep1s0f0", "spark-b/rocep1s0f0"}; !slices.Equal(rates, want) {
			t.Errorf("negotiated rates for %v, want only the up functions %v", rates, want)
		}
		failing, err := s.query(`spark_scrape_collector_success{collector="fabric"} != 1`)
		if err != nil || len(failing) > 0 {
			t.Errorf("the fabric collector failed: %v %v", failing, err)
		}
	})
}

// copySys copies a fixture /sys tree, its links as links, so that the test
// may rewrite its files.
func copySys(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "sys")
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(filepath.Join(dst, "class", "infiniband", "rocep1s0f0")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the copy of %s lost its class/ links: %v", filepath.Base(src), err)
	}
	return dst
}

// writeSysfs changes an attribute as sysfs does, in the same file: the
// fabric collector reads its files through descriptors kept open, which a
// file renamed over (writeAtomic) would leave on the old contents.
func writeSysfs(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
