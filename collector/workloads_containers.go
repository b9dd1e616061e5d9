package collector

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/spark-exporter/spark_exporter/internal/collected"
	"github.com/spark-exporter/spark_exporter/internal/container"
	"github.com/spark-exporter/spark_exporter/internal/container/dockerapi"
	"github.com/spark-exporter/spark_exporter/internal/engine"
	"github.com/spark-exporter/spark_exporter/internal/hostfs"
	"github.com/spark-exporter/spark_exporter/internal/workload"
)

// What the workloads collector adds to each workload beyond the scan: its
// container (/proc/PID/cgroup), Docker's name for it, and for an inference
// engine where it serves its own metrics (its command line, read for the
// port and dropped), for the engines collector and /sd/engines.

var (
	workloadContainerInfoDesc = newDesc("spark_workload_container_info",
		"A container a workload runs in, as the Docker Engine names it (--workloads.docker-socket); 1.",
		"container", "name", "image", "compose_service")
	workloadFieldSupportedDesc = newDesc("spark_workload_field_supported",
		"1 when the source is readable: docker, the Docker Engine API at --workloads.docker-socket.", "field")
)

type workloadPlaces struct {
	proc hostfs.FS
	// docker is nil without --workloads.docker-socket.
	docker *dockerapi.Docker
	// found receives the engines of each scan; nil when nothing asks.
	found *engine.Directory
	// sockets are the engines' sockets, remembered between scans.
	sockets engineSockets
	logger  log.Logger
	// dockerFailing: the failure has been logged, until it clears.
	dockerFailing bool
}

// place reads each workload's container and, for engines, its endpoint, and
// hands the engines to found. A cgroup that cannot be read leaves the
// workload unlabelled (container ""), as on the host.
func (p *workloadPlaces) place(ctx context.Context, res *workload.Result) *collected.Containers {
	proc := p.proc.WithContext(ctx)
	out := &collected.Containers{ByPID: make(map[int]container.Ref, len(res.Workloads))}
	var engines []workload.Workload
	var buf []byte
	for _, w := range res.Workloads {
		var ref container.Ref
		var err error
		if buf, err = proc.ReadFile(strconv.Itoa(w.PID)+"/cgroup", buf); err == nil {
			ref = container.ParseCgroup(buf)
		}
		out.ByPID[w.PID] = ref
		if p.found != nil && slices.Contains(engine.Kinds, w.Kind) {
			engines = append(engines, w)
		}
	}
	if p.found != nil {
		p.found.Set(p.sockets.targets(proc, engines, out.ByPID))
	}
	if p.docker != nil {
		infos, err := p.docker.Containers(time.Now())
		p.noteDocker(err)
		if err == nil {
			out.Names = map[string]container.Info{}
			for _, ref := range out.ByPID {
				if info, ok := infos[ref.ID]; ok && ref.ID != "" {
					out.Names[ref.ID] = info
				}
			}
		}
	}
	return out
}

// noteDocker logs a change of the Docker Engine's state, once.
func (p *workloadPlaces) noteDocker(err error) {
	switch {
	case err != nil && !p.dockerFailing:
		level.Warn(p.logger).Log("msg", "cannot name containers from the Docker Engine: spark_workload_field_supported{field=\"docker\"} 0 (the exporter's user needs the docker group)", "err", err)
	case err == nil && p.dockerFailing:
		level.Info(p.logger).Log("msg", "the Docker Engine answers again")
	}
	p.dockerFailing = err != nil
}

func (p *workloadPlaces) emit(ch chan<- prometheus.Metric, cs *collected.Containers) {
	if p.docker == nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(workloadFieldSupportedDesc, prometheus.GaugeValue, boolToFloat64(cs.Names != nil), "docker")
	for _, info := range cs.Names {
		ch <- prometheus.MustNewConstMetric(workloadContainerInfoDesc, prometheus.GaugeValue, 1,
			info.ID, info.Name, info.Image, info.ComposeService)
	}
}
