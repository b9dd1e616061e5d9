package collector

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// maxEntriesPerScrape caps the entries one collector reports per scrape from
// a source whose size the host decides (thermal zones, hwmon channels), each
// a series and a read. A Spark has about 40; 256 leaves room for any machine.
const maxEntriesPerScrape = 256

var entriesLeftOutDesc = newDesc("spark_scrape_collector_entries_left_out",
	"Entries a collector left out of the last scrape beyond its cap (platform: 256 thermal zones and sensor channels; fabric: 32 RDMA devices, 4 ports a device); they are named at debug level.",
	"collector")

// entryCap counts what a collector left out beyond a cap of its own; its
// Update sends the count on every run, failed or not.
type entryCap struct{ leftOut atomic.Int64 }

func (c *entryCap) set(n int) { c.leftOut.Store(int64(n)) }

func (c *entryCap) get() int { return int(c.leftOut.Load()) }

func (c *entryCap) send(ch chan<- prometheus.Metric, collector string) {
	ch <- prometheus.MustNewConstMetric(entriesLeftOutDesc, prometheus.GaugeValue, float64(c.get()), collector)
}
