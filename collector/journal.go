package collector

import (
	"context"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/spark-exporter/spark_exporter/internal/cliflag"
	"github.com/spark-exporter/spark_exporter/internal/flight"
	"github.com/spark-exporter/spark_exporter/internal/hostfs"
	"github.com/spark-exporter/spark_exporter/internal/journal"
)

// The journal collector counts the userspace OOM killers' kills, which the
// kernel's OOM counters never see: a background reader follows the journal
// (journal.Reader), a scrape reads its counts.
func init() {
	registerCollector("journal", defaultEnabled, func(fg cliflag.FlagGroup) Factory {
		dir := fg.Flag("journal.path",
			"A directory of journal files to read, as journalctl -D reads one (default: the system journal, which the systemd-journal group reads).").
			PlaceHolder("DIR").String()
		return func(env Env) (Collector, error) {
			boot := readBootID(hostfs.New(env.ProcFS).WithTimeout(env.ReadTimeout))
			c := newJournalCollector(journal.Source{Dir: *dir, Boot: boot}, env.Logger)
			c.start()
			return c, nil
		}
	})
}

var (
	journalKillsDesc = newDesc("spark_journal_oom_kills_total",
		"Processes a userspace OOM killer killed this boot, as the killer's own journal lines say (systemd-oomd: a cgroup, with every process in it).",
		"killer")
	journalSupportedDesc = newDesc("spark_journal_field_supported",
		"1 when the source is readable (journal: the systemd journal; where it is not, without the systemd-journal group or a journal, the journal series are absent).", "field")
)

type journalCollector struct {
	reader *journal.Reader
	logger log.Logger
}

func newJournalCollector(src journal.Source, logger log.Logger) *journalCollector {
	return &journalCollector{reader: journal.New(src), logger: logger}
}

// start follows the journal in the background until Close.
func (c *journalCollector) start() {
	c.reader.Start()
	if st := c.reader.State(); !st.Readable {
		// Not a failure: this host's journal is not the exporter's to
		// read, which the supported series says.
		level.Info(c.logger).Log("msg", `the journal cannot be read; spark_journal_field_supported{field="journal"} is 0`, "err", st.Err)
	}
}

func (c *journalCollector) Close() error { return c.reader.Close() }

func (c *journalCollector) Update(_ context.Context, ch chan<- prometheus.Metric) error {
	st := c.reader.State()
	ch <- prometheus.MustNewConstMetric(journalSupportedDesc, prometheus.GaugeValue, boolToFloat64(st.Readable), "journal")
	if !st.Readable {
		return nil
	}
	for _, k := range journal.Killers {
		ch <- prometheus.MustNewConstMetric(journalKillsDesc, prometheus.CounterValue, float64(st.Kills[k]), k)
	}
	return nil
}

// readBootID reads sys/kernel/random/boot_id; zero when it cannot (a fixture
// tree without it).
func readBootID(proc hostfs.FS) [16]byte {
	data, err := proc.ReadFile("sys/kernel/random/boot_id", nil)
	if err != nil {
		return [16]byte{}
	}
	return flight.ParseBootID(data)
}
