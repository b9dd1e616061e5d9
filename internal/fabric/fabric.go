// Package fabric reads the RDMA devices of a host from sysfs: on a DGX
// Spark, the four PCIe functions of its ConnectX-7 (two per QSFP port,
// rocep1s0f0 and roceP2p1s0f0 for the first), the link state and
// negotiated rate of each port, the PCIe link each function trained at,
// and the port's data, error and RoCE congestion counters.
//
// Read walks /sys/class/infiniband through the FS it is given (os.DirFS in
// tests, the exporter's bounded reader in the collector). Every entry of
// class/infiniband is a symbolic link into devices/ (the PCI function's
// infiniband/<dev> directory): only the final component of a name must
// not be a link, which the exporter's reads refuse, so the walk goes
// through class/infiniband/<dev>/... as any sysfs reader does.
//
// prometheus/procfs's sysfs.InfiniBandClass parses the same files, but it
// reads through os.ReadFile and os.ReadDir under no deadline and no size
// bound, fails the whole class on one device's unreadable file, and does
// not read the PCIe link of the function; hence this package, whose parsers
// take bytes and whose reads go wherever the caller's FS sends them.
package fabric

import (
	"errors"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"syscall"

	"github.com/spark-exporter/spark_exporter/internal/hostfs"
)

// FS is the part of a file system Read needs, with names relative to the
// sysfs mount point ("class/infiniband"). os.DirFS is one.
type FS = hostfs.TreeFS

// ClassDir is where the RDMA devices are listed, under the sysfs mount
// point. It is missing altogether where no RDMA driver is loaded.
const ClassDir = "class/infiniband"

// Bounds on what one read reports; what they leave out is counted in
// Snapshot.LeftOut.
const (
	// MaxDevices is the most devices read, the first in name order: a
	// Spark has four, and a server with a dozen adapters, each with
	// virtual functions, would otherwise grow every scrape without end.
	MaxDevices = 32
	// MaxPorts is the most ports read of a device, the lowest numbers: a
	// ConnectX function has one, an InfiniBand switch's device dozens.
	MaxPorts = 4
)

// Counter is one counter file by its kernel name.
type Counter struct {
	Name  string
	Value uint64
}

// Link is a PCIe link's width in lanes and speed in transfers per second;
// 0 when not known.
type Link struct {
	Width    float64
	Transfer float64
}

// Port is one port of an RDMA device.
type Port struct {
	Number    string // the port's number, as its directory names it ("1")
	LinkLayer string // "Ethernet" (RoCE) or "InfiniBand"; "" when unknown
	NetDev    string // the network interface bound to the port; "" when none
	// State and PhysState are the kernel's words ("ACTIVE", "LinkUp"); ""
	// when unreadable.
	State, PhysState string
	// RateBits is the negotiated rate in bits per second; 0 when unknown.
	RateBits float64
	// ReceiveBytes and TransmitBytes are port_rcv_data and port_xmit_data
	// in bytes; nil when unreadable. Floats, as Prometheus keeps them: a
	// 64-bit count of words × 4 does not fit in 64 bits.
	ReceiveBytes, TransmitBytes *float64
	Errors                      []Counter // ErrorCounters that could be read
	Events                      []Counter // EventCounters that could be read
	HWCounters                  bool      // the port has a hw_counters directory
}

// Known tells whether both state files were read: only then is Up an
// answer.
func (p Port) Known() bool { return p.State != "" && p.PhysState != "" }

// Up is true when the port is ACTIVE and its physical link LinkUp.
func (p Port) Up() bool { return p.State == "ACTIVE" && p.PhysState == "LinkUp" }

// Device is one RDMA device: on a Spark, one PCIe function of the
// ConnectX-7.
type Device struct {
	Name string
	// Current and Max are the PCIe link of the function (device/); nil
	// when neither of its attributes could be read.
	Current, Max *Link
	Ports        []Port
}

// Problem is a file that was there but could not be read or parsed, named
// relative to the sysfs mount point.
type Problem = hostfs.Problem

// Snapshot is one read of the RDMA devices.
type Snapshot struct {
	// RDMA is false when class/infiniband is missing or empty: no RDMA
	// driver, or no device.
	RDMA    bool
	Devices []Device // by name, at most MaxDevices
	// LeftOut counts the devices beyond MaxDevices and the ports beyond
	// MaxPorts, which were not read; FirstLeftOut names the first of them
	// relative to the sysfs mount point ("" when none).
	LeftOut      int
	FirstLeftOut string
	Problems     []Problem
	// Blocked is the read that did not answer within its deadline
	// (hostfs.ErrBlocked), after which nothing more was read.
	Blocked *Problem
}

// ErrorCounters are the counters/ files reported as
// spark_fabric_port_errors_total: the port error counters of the
// InfiniBand architecture's PortCounters (IBTA vol. 1, 16.1.3.5), which
// mlx5 exposes for RoCE ports too.
var ErrorCounters = []string{
	"excessive_buffer_overrun_errors",
	"link_downed",
	"link_error_recovery",
	"local_link_integrity_errors",
	"port_rcv_constraint_errors",
	"port_rcv_errors",
	"port_rcv_remote_physical_errors",
	"port_rcv_switch_relay_errors",
	"port_xmit_constraint_errors",
	"port_xmit_discards",
	"symbol_error",
	"VL15_dropped",
}

// EventCounters are the hw_counters/ files reported as
// spark_fabric_roce_events_total: the mlx5 counters that tell loss,
// retransmission and congestion (the kernel's
// Documentation/admin-guide/infiniband and NVIDIA's "Understanding mlx5
// Linux Counters").
var EventCounters = []string{
	"duplicate_request",
	"implied_nak_seq_err",
	"local_ack_timeout_err",
	"np_cnp_sent",
	"np_ecn_marked_roce_packets",
	"out_of_buffer",
	"out_of_sequence",
	"packet_seq_err",
	"req_cqe_error",
	"resp_cqe_error",
	"rnr_nak_retry_err",
	"roce_adp_retrans",
	"roce_slow_restart",
	"rp_cnp_handled",
	"rp_cnp_ignored",
}

// Read reads every RDMA device under fsys, in name order, at most
// MaxDevices. It never fails as a whole: what could not be read is a
// Problem, and a read that blocks stops the walk (Snapshot.Blocked).
func Read(fsys FS) Snapshot {
	r := &reader{Tree: hostfs.Tree{FS: fsys, Absent: absent}}
	var s Snapshot
	entries := r.Entries(ClassDir)
	var names []string
	for _, e := range entries {
		if validName(e.Name()) {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	s.RDMA = len(names) > 0
	if len(names) > MaxDevices {
		s.LeftOut += len(names) - MaxDevices
		s.FirstLeftOut = path.Join(ClassDir, names[MaxDevices])
		names = names[:MaxDevices]
	}
	for _, name := range names {
		d, leftOut, first := r.device(name)
		if leftOut > 0 && s.LeftOut == 0 {
			s.FirstLeftOut = first
		}
		s.LeftOut += leftOut
		if r.Blocked != nil {
			break
		}
		s.Devices = append(s.Devices, d)
	}
	s.Problems = r.Problems
	s.Blocked = r.Blocked
	if s.Blocked != nil {
		s.Devices = nil
	}
	return s
}

type reader struct {
	hostfs.Tree
}

// absent tells the errors that say "this attribute is not there" rather
// than "it could not be read": sysfs answers EINVAL or EOPNOTSUPP for a
// counter the device does not implement, and EINVAL for the rate of a
// port that has none.
func absent(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.EINVAL) ||
		errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENODEV)
}

// device reads one device, and counts and names the first of the ports it
// left out.
func (r *reader) device(name string) (d Device, leftOut int, firstLeftOut string) {
	dir := path.Join(ClassDir, name)
	d.Name = name
	d.Current = r.link(path.Join(dir, "device"), "current_link_width", "current_link_speed")
	d.Max = r.link(path.Join(dir, "device"), "max_link_width", "max_link_speed")

	var ports []int
	for _, e := range r.Entries(path.Join(dir, "ports")) {
		if n, err := strconv.Atoi(e.Name()); err == nil && n > 0 && strconv.Itoa(n) == e.Name() {
			ports = append(ports, n)
		}
	}
	slices.Sort(ports)
	if len(ports) > MaxPorts {
		leftOut = len(ports) - MaxPorts
		firstLeftOut = path.Join(dir, "ports", strconv.Itoa(ports[MaxPorts]))
		ports = ports[:MaxPorts]
	}
	netdevs := r.netdevs(path.Join(dir, "device", "net"))
	for _, n := range ports {
		d.Ports = append(d.Ports, r.port(dir, strconv.Itoa(n), netdevs))
	}
	return d, leftOut, firstLeftOut
}

// link reads a PCIe link's width and speed attributes; nil when neither
// gives a value.
func (r *reader) link(dir, width, speed string) *Link {
	var l Link
	if w, ok := hostfs.Parsed(&r.Tree, path.Join(dir, width), ParseLinkWidth); ok {
		l.Width = w
	}
	if s, ok := hostfs.Parsed(&r.Tree, path.Join(dir, speed), ParseLinkSpeed); ok {
		l.Transfer = s
	}
	if l.Width == 0 && l.Transfer == 0 {
		return nil
	}
	return &l
}

// netdevs lists the network interfaces of the PCI function (device/net/),
// by name.
func (r *reader) netdevs(dir string) []string {
	var names []string
	for _, e := range r.Entries(dir) {
		if ValidNetDev(e.Name()) {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return names
}

func (r *reader) port(dev, number string, netdevs []string) Port {
	dir := path.Join(dev, "ports", number)
	p := Port{Number: number}
	if v, ok := hostfs.Parsed(&r.Tree, path.Join(dir, "link_layer"), ParseWord); ok {
		p.LinkLayer = v
	}
	if v, ok := hostfs.Parsed(&r.Tree, path.Join(dir, "state"), ParseState); ok {
		p.State = v
	}
	if v, ok := hostfs.Parsed(&r.Tree, path.Join(dir, "phys_state"), ParseState); ok {
		p.PhysState = v
	}
	if v, ok := hostfs.Parsed(&r.Tree, path.Join(dir, "rate"), ParseRate); ok {
		p.RateBits = v
	}
	// The netdev of the port's first GID (the port's own address), else
	// the function's one interface: mlx5 binds one netdev per function.
	if v, ok := hostfs.Parsed(&r.Tree, path.Join(dir, "gid_attrs", "ndevs", "0"), ParseNetDev); ok {
		p.NetDev = v
	} else if len(netdevs) == 1 {
		p.NetDev = netdevs[0]
	}

	counters := path.Join(dir, "counters")
	// The data counters count 32-bit words (the IBTA's PortXmitData and
	// PortRcvData "divided by 4"): ×4 for bytes.
	if v, ok := hostfs.Parsed(&r.Tree, path.Join(counters, "port_rcv_data"), ParseCounter); ok {
		p.ReceiveBytes = wordsToBytes(v)
	}
	if v, ok := hostfs.Parsed(&r.Tree, path.Join(counters, "port_xmit_data"), ParseCounter); ok {
		p.TransmitBytes = wordsToBytes(v)
	}
	if listed, ok := r.listed(counters); ok {
		p.Errors = r.counters(counters, filter(ErrorCounters, listed))
	}
	hw := path.Join(dir, "hw_counters")
	if events, ok := r.listed(hw); ok {
		p.HWCounters = true
		p.Events = r.counters(hw, filter(EventCounters, events))
	}
	return p
}

// wordsToBytes converts before it multiplies: a count of 2^62 words or
// more would wrap to a false reset in uint64.
func wordsToBytes(words uint64) *float64 {
	b := float64(words) * 4
	return &b
}

// listed lists the names in dir; ok is false when it is absent or could
// not be listed.
func (r *reader) listed(dir string) (map[string]bool, bool) {
	entries, ok := r.Dir(dir)
	if !ok {
		return nil, false
	}
	names := make(map[string]bool, len(entries))
	for _, e := range entries {
		names[e.Name()] = true
	}
	return names, true
}

// filter keeps the names that were listed, in their order.
func filter(names []string, listed map[string]bool) []string {
	var out []string
	for _, n := range names {
		if listed[n] {
			out = append(out, n)
		}
	}
	return out
}

// counters reads the named counters of dir; a counter the device does not
// have is left out.
func (r *reader) counters(dir string, names []string) []Counter {
	var out []Counter
	for _, name := range names {
		if v, ok := hostfs.Parsed(&r.Tree, path.Join(dir, name), ParseCounter); ok {
			out = append(out, Counter{name, v})
		}
	}
	return out
}
