package collector

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/spark-exporter/spark_exporter/internal/cliflag"
	"github.com/spark-exporter/spark_exporter/internal/collected"
	"github.com/spark-exporter/spark_exporter/internal/fabric"
	"github.com/spark-exporter/spark_exporter/internal/hostfs"
)

// The fabric collector watches the ConnectX-7 link between two Sparks: the
// four PCIe functions of the adapter (two per QSFP port, each carrying
// about half of the port's 200 Gb/s), whether each port is up, the PCIe
// link each function trained at, and the traffic, error and RoCE
// congestion counters. The link fails in ways nothing else on the box
// reports: a function down, a function trained at x2, one rail idle while
// its twin carries the transfer.
func init() {
	registerCollector("fabric", defaultEnabled, func(fg cliflag.FlagGroup) Factory {
		return func(env Env) (Collector, error) {
			return newFabricCollector(env.SysFS, env.ReadTimeout, env.Logger), nil
		}
	})
}

var (
	fabricInfoDesc = newDesc("spark_fabric_info",
		"An RDMA device's port (device: the kernel's RDMA device name, on a Spark one PCIe function of the ConnectX-7), the network interface bound to it and its link layer. Always 1.",
		"device", "port", "netdev", "link_layer")
	fabricLinkUpDesc = newDesc("spark_fabric_link_up",
		"1 when the port is ACTIVE and its physical link LinkUp, 0 otherwise.", "device", "port")
	fabricRateDesc = newDesc("spark_fabric_link_rate_bits_per_second",
		"The rate the port negotiated (its rate attribute), while it is up.", "device", "port")
	fabricPCIeWidthDesc = newDesc("spark_fabric_pcie_link_width",
		"Lanes of the RDMA device's PCIe link: which=current as trained, which=max as it can.", "device", "which")
	fabricPCIeSpeedDesc = newDesc("spark_fabric_pcie_link_transfers_per_second",
		"Speed of the RDMA device's PCIe link in transfers per second: which=current as trained, which=max as it can.", "device", "which")
	fabricReceiveDesc = newDesc("spark_fabric_receive_bytes_total",
		"Bytes the port received (port_rcv_data, which counts 32-bit words, × 4).", "device", "port")
	fabricTransmitDesc = newDesc("spark_fabric_transmit_bytes_total",
		"Bytes the port transmitted (port_xmit_data, which counts 32-bit words, × 4).", "device", "port")
	fabricErrorsDesc = newDesc("spark_fabric_port_errors_total",
		"The port's error counters (counters/), by their kernel names.", "device", "port", "counter")
	fabricEventsDesc = newDesc("spark_fabric_roce_events_total",
		"The port's hardware counters (hw_counters/) that tell loss, retransmission and congestion, by their kernel names.", "device", "port", "counter")
	fabricSupportedDesc = newDesc("spark_fabric_field_supported",
		"1 when the host provides the source (rdma: an RDMA device; hw_counters: a port's hardware counters; pcie_link: a device's PCIe link attributes), 0 when it does not (its series are then absent).", "field")
)

type fabricCollector struct {
	sys    *sysfs
	now    func() time.Time
	logger log.Logger
	// A host with more devices than fabric.MaxDevices, or a device with
	// more ports than fabric.MaxPorts, is read up to those caps.
	EntryCap

	// A scrape reads the files of the layout discovered at most
	// rediscoverEvery ago, each through a descriptor kept open, and
	// replays the listings of that discovery (docs/performance.md:
	// opening a Spark's 152 files through the class/ links on every
	// scrape cost more than the rest of a scrape).
	mu         sync.Mutex
	layout     *fabricLayout
	discovered time.Time

	// last is the latest two readings, for the status page's traffic.
	last atomic.Pointer[collected.Fabric]
}

// maxKept bounds the files a layout keeps open: a host with more (dozens
// of RDMA devices) reads them afresh on every scrape instead.
const maxKept = 512

func newFabricCollector(root string, timeout time.Duration, logger log.Logger) *fabricCollector {
	return &fabricCollector{sys: newSysfs(root, timeout), now: time.Now, logger: logger}
}

// fabricLayout is what a discovery found: the files fabric.Read read (all
// but those that were not there) and the listings it made.
type fabricLayout struct {
	files []string
	dirs  map[string][]fs.DirEntry
}

func (c *fabricCollector) read() (fabric.Snapshot, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.layout == nil || c.now().Sub(c.discovered) >= rediscoverEvery {
		return c.discover()
	}
	l := c.layout
	if len(l.files) == 0 {
		// No RDMA device: nothing to read until the next discovery.
		return fabric.Read(replay{l, nil}), nil
	}
	value, err := c.sys.readAll(l.files, 0)
	if err != nil {
		c.layout = nil
		return fabric.Snapshot{}, err
	}
	values := make(map[string]keptValue, len(l.files))
	for i, name := range l.files {
		data, err := value(i)
		values[name] = keptValue{bytes.Clone(data), err}
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENODEV) {
			// A device or port went: the next scrape discovers afresh.
			c.layout = nil
		}
	}
	return fabric.Read(replay{l, values}), nil
}

// discover walks the devices in one batch of reads under one deadline,
// noting what it read and listed.
func (c *fabricCollector) discover() (fabric.Snapshot, error) {
	c.layout = nil
	var (
		s   fabric.Snapshot
		rec *recorder
	)
	blocked := c.sys.fs.Batch(func(r *hostfs.Reader) error {
		rec = &recorder{inner: &batchReader{r: r, sys: c.sys}, layout: &fabricLayout{dirs: map[string][]fs.DirEntry{}}}
		s = fabric.Read(rec)
		return nil
	})
	if blocked != nil {
		return fabric.Snapshot{}, c.sys.relative("", blocked)
	}
	if s.LeftOut > 0 {
		level.Debug(c.logger).Log("msg", "RDMA devices or ports left out beyond the cap", "devices", fabric.MaxDevices,
			"ports_per_device", fabric.MaxPorts, "left_out", s.LeftOut, "first", s.FirstLeftOut)
	}
	if s.Blocked == nil && len(rec.layout.files) <= maxKept {
		c.layout, c.discovered = rec.layout, c.now()
	}
	return s, nil
}

// recorder is a fabric.FS that notes the files read (all but the absent)
// and the directories listed.
type recorder struct {
	inner  fabric.FS
	layout *fabricLayout
}

func (r *recorder) ReadFile(name string) ([]byte, error) {
	data, err := r.inner.ReadFile(name)
	if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, hostfs.ErrBlocked) {
		r.layout.files = append(r.layout.files, name)
	}
	return data, err
}

func (r *recorder) ReadDir(name string) ([]fs.DirEntry, error) {
	entries, err := r.inner.ReadDir(name)
	if err == nil {
		r.layout.dirs[name] = entries
	}
	return entries, err
}

// keptValue is what a kept file's read gave.
type keptValue struct {
	data []byte
	err  error
}

// replay is a layout's listings and this scrape's reads of its files as a
// fabric.FS: a file or directory the discovery did not find is absent.
type replay struct {
	layout *fabricLayout
	values map[string]keptValue
}

func (r replay) ReadFile(name string) ([]byte, error) {
	if v, ok := r.values[name]; ok {
		return v.data, v.err
	}
	return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
}

func (r replay) ReadDir(name string) ([]fs.DirEntry, error) {
	if entries, ok := r.layout.dirs[name]; ok {
		return entries, nil
	}
	return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
}

// batchReader is a hostfs.Reader as a fabric.FS. What ReadFile returns is
// valid until the next call: the parsers are done with it by then.
type batchReader struct {
	r   *hostfs.Reader
	sys *sysfs
	buf []byte
}

func (b *batchReader) ReadFile(name string) ([]byte, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	data, err := b.r.ReadFile(name, b.buf)
	if err == nil {
		b.buf = data
	}
	return data, b.sys.relative(name, err)
}

func (b *batchReader) ReadDir(name string) ([]fs.DirEntry, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	entries, err := b.r.ReadDir(name)
	return entries, b.sys.relative(name, err)
}

func (c *fabricCollector) refresh() error {
	_, err := c.take()
	return err
}

// take reads the devices and keeps the reading for publish.
func (c *fabricCollector) take() (fabric.Snapshot, error) {
	s, err := c.read()
	c.Set(s.LeftOut)
	if err == nil && s.Blocked != nil {
		err = s.Blocked
	}
	if err != nil {
		// The next file may block as long: nothing more was read.
		return s, fmt.Errorf("reading sysfs: %w", err)
	}
	c.remember(s)
	for _, p := range s.Problems {
		level.Debug(c.logger).Log("msg", "sysfs file unreadable", "file", p.File, "err", p.Err)
	}
	return s, nil
}

func (c *fabricCollector) Update(ch chan<- prometheus.Metric) error {
	s, err := c.take()
	if err != nil {
		return err
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, labels...)
	}

	gauge(fabricSupportedDesc, boolToFloat64(s.RDMA), "rdma")
	if !s.RDMA {
		return nil
	}
	hwCounters, pcie := false, false
	for _, d := range s.Devices {
		for which, l := range map[string]*fabric.Link{"current": d.Current, "max": d.Max} {
			if l == nil {
				continue
			}
			pcie = true
			if l.Width > 0 {
				gauge(fabricPCIeWidthDesc, l.Width, d.Name, which)
			}
			if l.Transfer > 0 {
				gauge(fabricPCIeSpeedDesc, l.Transfer, d.Name, which)
			}
		}
		for _, p := range d.Ports {
			gauge(fabricInfoDesc, 1, d.Name, p.Number, p.NetDev, p.LinkLayer)
			if p.Known() {
				gauge(fabricLinkUpDesc, boolToFloat64(p.Up()), d.Name, p.Number)
			}
			// A port that is down keeps the rate of some earlier or
			// default state: it negotiated nothing.
			if p.Known() && p.Up() && p.RateBits > 0 {
				gauge(fabricRateDesc, p.RateBits, d.Name, p.Number)
			}
			if p.ReceiveBytes != nil {
				counter(fabricReceiveDesc, *p.ReceiveBytes, d.Name, p.Number)
			}
			if p.TransmitBytes != nil {
				counter(fabricTransmitDesc, *p.TransmitBytes, d.Name, p.Number)
			}
			for _, e := range p.Errors {
				counter(fabricErrorsDesc, float64(e.Value), d.Name, p.Number, e.Name)
			}
			for _, e := range p.Events {
				counter(fabricEventsDesc, float64(e.Value), d.Name, p.Number, e.Name)
			}
			hwCounters = hwCounters || p.HWCounters
		}
	}
	gauge(fabricSupportedDesc, boolToFloat64(hwCounters), "hw_counters")
	gauge(fabricSupportedDesc, boolToFloat64(pcie), "pcie_link")
	return nil
}

// remember keeps a reading and a copy of the one before it: a pointer
// into the previous Fabric would keep that one, and its own previous,
// alive, a chain of every reading.
func (c *fabricCollector) remember(s fabric.Snapshot) {
	next := &collected.Fabric{Latest: collected.FabricReading{At: c.now(), Snapshot: s}}
	if prev := c.last.Load(); prev != nil {
		previous := prev.Latest
		next.Previous = &previous
	}
	c.last.Store(next)
}

func (c *fabricCollector) publish(st *collected.State) { st.Fabric = c.last.Load() }
