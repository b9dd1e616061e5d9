// Package processcollector reports the exporter's own process as the
// process_* series of client_golang's process collector, at a tenth of its
// cost.
//
// That collector parses four /proc files on every scrape, together more CPU
// than the rest of a scrape (docs/performance.md). Here CPU time and limits
// come from getrusage and getrlimit, memory from /proc/self/statm, open files
// from the size of /proc/self/fd, and the start time is read once. The
// process_network_* pair is left out: /proc/self/net/netstat counts the whole
// network namespace (the host's, on the host network), not the process.
package processcollector

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/procfs"

	"github.com/spark-exporter/spark_exporter/internal/hostfs"
)

var (
	cpuDesc = prometheus.NewDesc("process_cpu_seconds_total",
		"Total user and system CPU time spent in seconds.", nil, nil)
	openFDsDesc = prometheus.NewDesc("process_open_fds",
		"Number of open file descriptors.", nil, nil)
	maxFDsDesc = prometheus.NewDesc("process_max_fds",
		"Maximum number of open file descriptors.", nil, nil)
	vsizeDesc = prometheus.NewDesc("process_virtual_memory_bytes",
		"Virtual memory size in bytes.", nil, nil)
	maxVsizeDesc = prometheus.NewDesc("process_virtual_memory_max_bytes",
		"Maximum amount of virtual memory available in bytes.", nil, nil)
	rssDesc = prometheus.NewDesc("process_resident_memory_bytes",
		"Resident memory size in bytes.", nil, nil)
	startDesc = prometheus.NewDesc("process_start_time_seconds",
		"Start time of the process since unix epoch in seconds.", nil, nil)
)

// The process is the exporter itself: its /proc entry is always in its
// own /proc, whatever --path.procfs points at.
var ownProc = hostfs.New("/proc")

const (
	statmName = "self/statm"
	// statmBytes holds statm's seven numbers, each of up to 16 digits.
	statmBytes = 128
	fdPath     = "/proc/self/fd"
)

type collector struct {
	start    float64 // 0 when unknown
	pageSize uint64
}

// New returns the collector. The start time is read once, with
// prometheus/procfs: its parser already turns /proc/self/stat's starttime
// into epoch seconds (boot time from /proc/stat, clock tick), which nothing
// else here needs.
func New() prometheus.Collector {
	c := &collector{pageSize: uint64(os.Getpagesize())}
	if p, err := procfs.Self(); err == nil {
		if st, err := p.Stat(); err == nil {
			c.start, _ = st.StartTime()
		}
	}
	return c
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{cpuDesc, openFDsDesc, maxFDsDesc, vsizeDesc, maxVsizeDesc, rssDesc, startDesc} {
		ch <- d
	}
}

// Collect sends what could be read; a series that could not is left out,
// as client_golang's collector does by default.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		cpu := float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
		ch <- prometheus.MustNewConstMetric(cpuDesc, prometheus.CounterValue, cpu)
	}
	if data, err := ownProc.ReadFile(statmName, make([]byte, 0, statmBytes)); err == nil {
		if size, resident, err := parseStatm(data); err == nil {
			gauge(vsizeDesc, float64(size*c.pageSize))
			gauge(rssDesc, float64(resident*c.pageSize))
		}
	}
	if n, err := countFDs(); err == nil {
		gauge(openFDsDesc, float64(n))
	}
	var lim syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil {
		gauge(maxFDsDesc, float64(lim.Cur))
	}
	if syscall.Getrlimit(syscall.RLIMIT_AS, &lim) == nil {
		gauge(maxVsizeDesc, float64(lim.Cur))
	}
	if c.start > 0 {
		gauge(startDesc, c.start)
	}
}

// countFDs counts the process's open files. Since Linux 6.2 the size of
// /proc/self/fd is that count: one stat, where a listing makes procfs build
// an entry per descriptor (the workloads collector keeps one open per
// process it watches). Older kernels report 0, and the directory is listed.
func countFDs() (int, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(fdPath, &st); err == nil && st.Size > 0 {
		return int(st.Size), nil
	}
	return listFDs()
}

// listFDs counts the process's open files by listing /proc/self/fd, the
// listing's own included (as client_golang counts them).
func listFDs() (int, error) {
	f, err := os.Open(fdPath)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	return len(names), err
}

var errStatm = errors.New("statm: not two sizes in pages")

// parseStatm reads the first two fields of /proc/PID/statm: the virtual
// memory size and the resident set, in pages.
func parseStatm(data []byte) (size, resident uint64, err error) {
	fields := bytes.Fields(data)
	if len(fields) < 2 {
		return 0, 0, errStatm
	}
	size, err1 := strconv.ParseUint(string(fields[0]), 10, 64)
	resident, err2 := strconv.ParseUint(string(fields[1]), 10, 64)
	if err1 != nil || err2 != nil || size > 1<<52 || resident > 1<<52 {
		return 0, 0, errStatm
	}
	return size, resident, nil
}
