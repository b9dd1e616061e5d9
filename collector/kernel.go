package collector

import (
	"context"
	"errors"
	"io/fs"
	"sort"
	"strconv"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/spark-exporter/spark_exporter/internal/cliflag"
	"github.com/spark-exporter/spark_exporter/internal/collected"
	"github.com/spark-exporter/spark_exporter/internal/kmsg"
)

// The kernel collector counts what the kernel logged about the failures
// that leave nothing else behind: OOM kills by constraint (a global OOM
// and a container's limit look the same to Docker), the GPU driver's
// failed allocations, which preceded every public GB10 wedge, NVRM Xid
// errors and PCIe AER errors. A background reader follows /dev/kmsg
// (kmsg.Reader); a scrape reads its counts.
func init() {
	registerCollector("kernel", defaultEnabled, func(fg cliflag.FlagGroup) Factory {
		path := fg.Flag("kernel.kmsg-path",
			"The kernel log to read, in /dev/kmsg's record format; reading it needs CAP_SYSLOG where kernel.dmesg_restrict is set. "+
				"A file (64 MiB at most) or FIFO of such records is read too; another device than /dev/kmsg is refused.").Default("/dev/kmsg").String()
		return func(env Env) (Collector, error) {
			c := newKernelCollector(*path, env.Logger)
			c.results = env.Results
			c.start()
			return c, nil
		}
	})
}

var (
	kernelOOMDesc = newDesc("spark_kernel_oom_kills_total",
		"OOM kills the kernel logged since boot (as far as its ring holds them), by constraint: global (CONSTRAINT_NONE, the whole pool ran out) or cgroup (a container's limit).",
		"constraint")
	kernelDriverOOMDesc = newDesc("spark_kernel_gpu_driver_out_of_memory_total",
		"NVRM NV_ERR_NO_MEMORY lines the kernel logged since boot: the GPU driver failed an allocation.")
	kernelXidDesc = newDesc("spark_kernel_gpu_xid_errors_total",
		"NVRM Xid events the kernel logged since boot, by code.", "xid")
	kernelAERDesc = newDesc("spark_kernel_pcie_aer_errors_total",
		"PCIe AER errors the kernel logged since boot, by severity (corrected, nonfatal, fatal).", "severity")
	kernelSMMUDesc = newDesc("spark_kernel_smmu_timeouts_total",
		"ARM SMMU CMD_SYNC timeouts the kernel logged since boot: the IOMMU stopped answering (about once a second on a GB10 whose GPU was lost).")
	kernelSkippedDesc = newDesc("spark_kernel_log_records_skipped_total",
		"Kernel log records not counted, by reason: overrun (the kernel's ring overwrote them before they were read), malformed (not a kmsg record), not_kernel (another facility's: a user's, a daemon's or a container's write to /dev/kmsg).",
		"reason")
	kernelSupportedDesc = newDesc("spark_kernel_field_supported",
		"1 when the source is readable (kmsg: the kernel log; without CAP_SYSLOG it is not, and the kernel series are absent).", "field")
)

type kernelCollector struct {
	reader  *kmsg.Reader // nil: the log could not be read
	results *collected.Results
	entryCap
}

func newKernelCollector(path string, logger log.Logger) *kernelCollector {
	r, err := kmsg.Open(path)
	if err != nil {
		// Not a failure of the collector: the log is unreadable here
		// (a container without CAP_SYSLOG), which the supported series
		// says. The path is not logged: only the kind of error.
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		level.Info(logger).Log("msg", "the kernel log cannot be read; spark_kernel_field_supported{field=\"kmsg\"} is 0", "err", err)
		return &kernelCollector{}
	}
	if !r.Readable() {
		level.Info(logger).Log("msg", "the kernel log is a FIFO nothing was read from yet; spark_kernel_field_supported{field=\"kmsg\"} is 0 until a record is read")
	}
	return &kernelCollector{reader: r}
}

// start follows the log in the background until Close.
func (c *kernelCollector) start() {
	if c.reader != nil {
		c.reader.Start()
	}
}

func (c *kernelCollector) Close() error {
	if c.reader == nil {
		return nil
	}
	return c.reader.Close()
}

func (c *kernelCollector) state() collected.Kernel {
	if c.reader == nil {
		return collected.Kernel{Counts: kmsg.NewCounts()}
	}
	return collected.Kernel{Readable: c.reader.Readable(), Counts: c.reader.Counts()}
}

func (c *kernelCollector) Update(ctx context.Context, ch chan<- prometheus.Metric) error {
	defer c.send(ch, "kernel")
	k := c.state()
	c.results.Set(func(st *collected.State) { st.Kernel = &k })
	ch <- prometheus.MustNewConstMetric(kernelSupportedDesc, prometheus.GaugeValue, boolToFloat64(k.Readable), "kmsg")
	if !k.Readable {
		return nil
	}
	for _, constraint := range []string{kmsg.Global, kmsg.Cgroup} {
		ch <- prometheus.MustNewConstMetric(kernelOOMDesc, prometheus.CounterValue, float64(k.Counts.OOMKills[constraint]), constraint)
	}
	ch <- prometheus.MustNewConstMetric(kernelDriverOOMDesc, prometheus.CounterValue, float64(k.Counts.DriverOutOfMemory))
	ch <- prometheus.MustNewConstMetric(kernelSMMUDesc, prometheus.CounterValue, float64(k.Counts.SMMUTimeouts))
	codes := make([]int, 0, len(k.Counts.Xid))
	for code := range k.Counts.Xid {
		codes = append(codes, code)
	}
	sort.Ints(codes)
	for _, code := range codes {
		ch <- prometheus.MustNewConstMetric(kernelXidDesc, prometheus.CounterValue, float64(k.Counts.Xid[code]), strconv.Itoa(code))
	}
	for _, severity := range []string{kmsg.Corrected, kmsg.NonFatal, kmsg.Fatal} {
		ch <- prometheus.MustNewConstMetric(kernelAERDesc, prometheus.CounterValue, float64(k.Counts.AER[severity]), severity)
	}
	for _, reason := range []string{kmsg.Overrun, kmsg.Malformed, kmsg.NotKernel} {
		ch <- prometheus.MustNewConstMetric(kernelSkippedDesc, prometheus.CounterValue, float64(k.Counts.Skipped[reason]), reason)
	}
	c.set(int(min(k.Counts.LeftOut, 1<<31)))
	return nil
}
