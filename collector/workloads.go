package collector

import (
	"context"
	"strconv"
	"sync/atomic"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/spark-exporter/spark_exporter/internal/cliflag"
	"github.com/spark-exporter/spark_exporter/internal/collected"
	"github.com/spark-exporter/spark_exporter/internal/container/dockerapi"
	"github.com/spark-exporter/spark_exporter/internal/hostfs"
	"github.com/spark-exporter/spark_exporter/internal/workload"
)

// The workloads collector reports who else is on the pool: inference servers
// and trainers found in /proc, the memory each holds, and the cap each was
// started with. The rule is one uncapped heavy job at a time (docs/design.md),
// so a server's cap matters as much as its presence.
func init() {
	registerCollector("workloads", defaultEnabled, func(fg cliflag.FlagGroup) Factory {
		patterns := cliflag.List(fg.Flag("workloads.match",
			"Extra workload pattern role:kind:regex (role inference or training), matched against a process's "+
				"arguments joined by spaces, before the built-in rules; repeatable. "+
				`Example: training:finetune:python3 .*/finetune\.py`),
			workload.ParsePattern)
		dockerSocket := fg.Flag("workloads.docker-socket",
			"The Docker Engine API's Unix socket (e.g. /var/run/docker.sock), to name the containers workloads run in; "+
				"off when empty. The exporter's user needs the docker group.").Default("").String()
		return func(env Env) (Collector, error) {
			c := newWorkloadsCollector(hostfs.New(env.ProcFS), *patterns, env.Logger)
			c.places.found = env.Engines
			c.results = env.Results
			if *dockerSocket != "" {
				c.places.docker = dockerapi.NewDocker(*dockerSocket)
			}
			return c, nil
		}
	})
}

var (
	workloadsDesc = newDesc("spark_workloads",
		"Workloads found in /proc, per role; both roles are always reported.", "role")
	workloadInfoDesc = newDesc("spark_workload_info",
		"A workload: one program (server, trainer or launcher) with every process it started; container: the first 12 hex digits "+
			"of the ID of the container it runs in (\"\" on the host), pod_uid: its Kubernetes pod.", "pid", "kind", "role", "container", "pod_uid")
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
	places  workloadPlaces
	results *collected.Results
	// last is what the latest Update rendered; nil when it failed.
	last       atomic.Pointer[workload.Result]
	containers atomic.Pointer[collected.Containers]
}

func (c *workloadsCollector) store(st *collected.State) {
	st.Workloads, st.Containers = c.last.Load(), c.containers.Load()
}

func newWorkloadsCollector(proc hostfs.FS, patterns []workload.Pattern, logger log.Logger) *workloadsCollector {
	return &workloadsCollector{scanner: workload.NewScanner(proc, patterns), logger: logger,
		places: workloadPlaces{proc: proc, logger: logger}}
}

// Close closes the /proc files the scanner keeps open between scrapes.
func (c *workloadsCollector) Close() error { return c.scanner.Close() }

func (c *workloadsCollector) scan(ctx context.Context) (workload.Result, *collected.Containers, error) {
	res, err := c.scanner.Scan(ctx)
	if err != nil {
		c.last.Store(nil)
		c.containers.Store(nil)
		return res, nil, err
	}
	containers := c.places.place(ctx, &res)
	c.last.Store(&res)
	c.containers.Store(containers)
	// A process's problems come once, at the scan that first finds it.
	for _, p := range res.Problems {
		level.Debug(c.logger).Log("msg", "no memory cap exported for a workload", "pid", p.PID, "kind", p.Kind, "reason", p.What)
	}
	return res, containers, nil
}

func (c *workloadsCollector) Update(ctx context.Context, ch chan<- prometheus.Metric) error {
	res, containers, err := c.scan(ctx)
	c.results.Set(c.store)
	if err != nil {
		return err
	}

	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	perRole := map[workload.Role]int{}
	for _, w := range res.Workloads {
		perRole[w.Role]++
		pid, role := strconv.Itoa(w.PID), string(w.Role)
		ref := containers.ByPID[w.PID]
		gauge(workloadInfoDesc, 1, pid, w.Kind, role, ref.ID, ref.PodUID)
		gauge(workloadResidentDesc, float64(w.ResidentBytes), pid, w.Kind, role)
		if w.Cap.Source != "" {
			gauge(workloadCapDesc, w.Cap.Ratio, pid, w.Kind, string(w.Cap.Source))
		}
	}
	for _, role := range workload.Roles {
		gauge(workloadsDesc, float64(perRole[role]), string(role))
	}
	gauge(workloadUnreadableDesc, float64(res.Unreadable))
	c.places.emit(ch, containers)
	return nil
}
