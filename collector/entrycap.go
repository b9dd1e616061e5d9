package collector

import "sync/atomic"

// MaxEntriesPerScrape caps the entries one collector reports per scrape
// from a source whose size the host decides (thermal zones, hwmon
// channels, …): a host, or a fixture, with thousands of them
// would otherwise cost every scrape thousands of series, reads and kept
// descriptors. A Spark has about 40 such platform values; 256 leaves room
// for any real machine.
const MaxEntriesPerScrape = 256

var entriesLeftOutDesc = newDesc("spark_scrape_collector_entries_left_out",
	"Entries a collector left out of the last scrape beyond its cap (platform: 256 thermal zones and sensor channels; fabric: 32 RDMA devices, 4 ports a device); they are named at debug level.",
	"collector")

// EntryCap counts what a collector left out beyond its cap:
// MaxEntriesPerScrape (Keep), or caps of its own per kind of entry (Set).
// A collector that caps its entries embeds one and sets it at each scrape
// (Set, or Keep); the exporter then reports
// spark_scrape_collector_entries_left_out for it beside its success. The
// collector names what it left out at debug level.
type EntryCap struct{ leftOut atomic.Int64 }

// Keep is how many of n entries to report: at most MaxEntriesPerScrape,
// the rest counted as left out.
func (c *EntryCap) Keep(n int) int {
	kept := min(n, MaxEntriesPerScrape)
	c.Set(n - kept)
	return kept
}

// Set records that n entries were left out of this scrape, by a cap
// applied elsewhere (when the collector discovered its sources).
func (c *EntryCap) Set(n int) { c.leftOut.Store(int64(n)) }

// EntriesLeftOut is what the last scrape left out.
func (c *EntryCap) EntriesLeftOut() int { return int(c.leftOut.Load()) }

// capped is a collector with an EntryCap.
type capped interface{ EntriesLeftOut() int }
