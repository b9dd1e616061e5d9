package collector

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/spark-exporter/spark_exporter/internal/cliflag"
	"github.com/spark-exporter/spark_exporter/internal/collected"
	"github.com/spark-exporter/spark_exporter/internal/fabric"
	"github.com/spark-exporter/spark_exporter/internal/layout"
)

// The fabric collector watches the ConnectX-7 link between two Sparks: the
// four PCIe functions of the adapter (two per QSFP port, each carrying about
// half of the port's 200 Gb/s), each port's state, each function's PCIe
// link, and the traffic, error and RoCE congestion counters. The link fails
// in ways nothing else reports: a function down, a function trained at x2,
// one rail idle while its twin carries the transfer.
func init() {
	registerCollector("fabric", defaultEnabled, func(fg cliflag.FlagGroup) Factory {
		return func(env Env) (Collector, error) {
			c := newFabricCollector(env.SysFS, env.Logger)
			c.results = env.Results
			return c, nil
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
	entryCap
	results *collected.Results

	mu     sync.Mutex // held through an Update: the series are built as sent
	layout layout.Kept[fabricLayout]

	// last is the latest two readings, for the status page's traffic.
	last atomic.Pointer[collected.Fabric]
}

type fabricLayout struct {
	*fabric.Layout
	series layoutSeries
}

func newFabricCollector(root string, logger log.Logger) *fabricCollector {
	return &fabricCollector{sys: newSysfs(root), now: time.Now, logger: logger}
}

// Close closes the files held open from one scrape to the next.
func (c *fabricCollector) Close() error { return c.sys.fs.Close() }

func (c *fabricCollector) read(ctx context.Context) (fabric.Snapshot, layoutSeries, error) {
	var err error
	l := c.layout.Get(c.now(), func() *fabricLayout {
		var d *fabric.Layout
		if err = c.sys.batch(ctx, func(fsys layout.FS) { d = fabric.Discover(fsys) }); err != nil {
			return nil
		}
		if n, first := d.LeftOut(); n > 0 {
			level.Debug(c.logger).Log("msg", "RDMA devices or ports left out beyond the cap", "devices", fabric.MaxDevices,
				"ports_per_device", fabric.MaxPorts, "left_out", n, "first", first)
		}
		return &fabricLayout{d, layoutSeries{}}
	})
	if err != nil {
		return fabric.Snapshot{}, nil, err
	}
	var s fabric.Snapshot
	if l.Empty() {
		// No RDMA device (most hosts): nothing to read, no batch to run.
		s = l.Read(nil)
	} else if err := c.sys.batch(ctx, func(fsys layout.FS) { s = l.Read(fsys) }); err != nil {
		c.layout.Forget()
		return fabric.Snapshot{}, nil, err
	}
	if s.Stale {
		// A device or port went, or a read blocked: this scrape reports
		// what is left, the next one discovers afresh.
		c.layout.Forget()
	}
	return s, l.series, nil
}

// take reads the devices and stores the reading; c.mu held.
func (c *fabricCollector) take(ctx context.Context) (fabric.Snapshot, layoutSeries, error) {
	s, series, err := c.read(ctx)
	c.set(s.LeftOut)
	if err := sysfsOutcome(c.logger, err, s.Blocked, s.Problems); err != nil {
		c.results.Set(func(st *collected.State) { st.Fabric = nil })
		return s, nil, err
	}
	c.remember(s)
	return s, series, nil
}

func (c *fabricCollector) Update(ctx context.Context, ch chan<- prometheus.Metric) error {
	defer c.send(ch, "fabric")
	c.mu.Lock()
	defer c.mu.Unlock()
	s, series, err := c.take(ctx)
	if err != nil {
		return err
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		series.send(ch, d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v float64, labels ...string) {
		series.send(ch, d, prometheus.CounterValue, v, labels...)
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
	c.results.Set(func(st *collected.State) { st.Fabric = next })
}
