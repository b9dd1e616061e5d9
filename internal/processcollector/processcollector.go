// Package processcollector gives client_golang's process_* series from
// getrusage, getrlimit and /proc/self/statm instead of its four /proc files a
// scrape. process_network_* is left out: /proc/self/net/netstat counts the
// whole network namespace, not the process.
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

// ownProc is the exporter's own /proc, whatever --path.procfs points at.
var ownProc = hostfs.New("/proc")

const (
	statmName  = "self/statm"
	statmBytes = 128 // seven numbers of up to 16 digits
	fdPath     = "/proc/self/fd"
)

type collector struct {
	start    float64 // 0 when unknown
	pageSize uint64
}

// New reads the start time once, with procfs: it knows the boot time and clock tick.
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

// Collect leaves out what could not be read, as client_golang's collector does.
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

// countFDs: since Linux 6.2 the size of /proc/self/fd is the count, one stat
// where a listing builds an entry per descriptor; older kernels report 0.
func countFDs() (int, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(fdPath, &st); err == nil && st.Size > 0 {
		return int(st.Size), nil
	}
	return listFDs()
}

// listFDs counts the listing's own, as client_golang does.
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

// parseStatm reads the virtual and resident sizes, in pages.
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
