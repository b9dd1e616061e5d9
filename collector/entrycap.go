package collector

import "sync/atomic"

// MaxEntriesPerScrape caps the entries one collector reports per scrape from
// a source whose size the host decides (thermal zones, hwmon channels), each
// a series and a read. A Spark has about 40; 256 leaves room for any machine.
const MaxEntriesPerScrape = 256

var entriesLeftOutDesc = newDesc("spark_scrape_collector_entries_left_out",
	"Entries a collector left out of the last scrape beyond its cap (platform: 256 thermal zones and sensor channels; fabric: 32 RDMA devices, 4 ports a device); they are named at debug level.",
	"collector")

// EntryCap counts what a collector left out beyond its cap; embedded, it makes
// the exporter report spark_scrape_collector_entries_left_out for it.
type EntryCap struct{ leftOut atomic.Int64 }

// Set records that n entries were left out by a cap of the collector's own.
func (c *EntryCap) Set(n int) { c.leftOut.Store(int64(n)) }

// EntriesLeftOut is what the last scrape left out.
func (c *EntryCap) EntriesLeftOut() int { return int(c.leftOut.Load()) }

type capped interface{ EntriesLeftOut() int }
