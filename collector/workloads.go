package collector

import (
	"strconv"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/spark-exporter/spark_exporter/internal/cliflag"
	"github.com/spark-exporter/spark_exporter/internal/hostfs"
	"github.com/spark-exporter/spark_exporter/internal/workload"
)

// The workloads collector reports who else is on the pool: inference servers
// and trainers found in /proc, the memory each holds, and the cap each was
// started with. The rule is one uncapped heavy job at a time (docs/design.md), so a
// server's cap matters as much as its presence.
func init() {
	registerCollector("workloads", defaultEnabled, func(fg cliflag.FlagGroup) Factory {
		patterns := cliflag.List(fg.Flag("workloads.match",
			"Extra workload pattern role:kind:regex (role inference or training), matched against a process's "+
				"arguments joined by spaces, before the built-in rules; repeatable. "+
				`Example: training:finetune:python3 .*/finetune\.py`),
			workload.ParsePattern)
		return func(env Env) (Collector, error) {
			return newWorkloadsCollector(hostfs.New(env.ProcFS).WithTimeout(env.ReadTimeout), *patterns, env.Logger), nil
		}
	})
}

var (
	workloadsDesc = newDesc("spark_workloads",
		"Workloads found in /proc, per role; both roles are always reported.", "role")
	workloadInfoDesc = newDesc("spark_workload_info",
		"A workload: one program (server, trainer or launcher) with every process it started.", "pid", "kind", "role")
	workloadResidentDesc = newDesc("spark_workload_resident_bytes",
		"VmRSS summed over the workload's processes.", "pid", "kind", "role")
	workloadCapDesc = newDesc("spark_workload_memory_cap_ratio",
		"Share of the memory the workload was started to take (vLLM --gpu-memory-utilization, SGLang --mem-fraction-static); "+
			"source=default when the flag is absent. No series: no cap known (uncapped).", "pid", "kind", "source")
	workloadUnreadableDesc = newDesc("spark_workload_unreadable_processes",
		"Processes whose /proc entry could not be read (hidepid, permissions): workload detection may be blind to them.")
)

type workloadsCollector struct {
	scanner *workload.Scanner
	logger  log.Logger
}

func newWorkloadsCollector(proc hostfs.FS, patterns []workload.Pattern, logger log.Logger) *workloadsCollector {
	return &workloadsCollector{scanner: workload.NewScannerOn(proc, patterns), logger: logger}
}

// Close closes the /proc files the scanner keeps open between scrapes.
func (c *workloadsCollector) Close() error { return c.scanner.Close() }

func (c *workloadsCollector) Update(ch chan<- prometheus.Metric) error {
	res, err := c.scanner.Scan()
	if err != nil {
		return err
	}
	for _, p := range res.Problems {
		level.Debug(c.logger).Log("msg", "no memory cap exported for a workload", "pid", p.PID, "kind", p.Kind, "reason", p.What)
	}

	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	perRole := map[workload.Role]int{}
	for _, w := range res.Workloads {
		perRole[w.Role]++
		pid, role := strconv.Itoa(w.PID), string(w.Role)
		gauge(workloadInfoDesc, 1, pid, w.Kind, role)
		gauge(workloadResidentDesc, float64(w.ResidentBytes), pid, w.Kind, role)
		if w.Cap.Source != "" {
			gauge(workloadCapDesc, w.Cap.Ratio, pid, w.Kind, string(w.Cap.Source))
		}
	}
	for _, role := range workload.Roles {
		gauge(workloadsDesc, float64(perRole[role]), string(role))
	}
	gauge(workloadUnreadableDesc, float64(res.Unreadable))
	return nil
}
