// Package fabric reads the RDMA devices of a host from sysfs: on a DGX
// Spark, the four PCIe functions of its ConnectX-7 (two per QSFP port,
// rocep1s0f0 and roceP2p1s0f0 for the first), the link state and
// negotiated rate of each port, the PCIe link each function trained at,
// and the port's data, error and RoCE congestion counters.
//
// Entries of class/infiniband are links into devices/; the exporter's reads
// refuse only a link as a name's last component, so names go through
// class/infiniband/<dev>/. prometheus/procfs's sysfs.InfiniBandClass fails
// the whole class on one device's unreadable file and does not read the
// function's PCIe link.
package fabric

import (
	"errors"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"syscall"

	"github.com/spark-exporter/spark_exporter/internal/layout"
)

// FS is what the devices are read through, names relative to the sysfs mount.
type FS = layout.FS

// ClassDir lists the RDMA devices; it is missing without an RDMA driver.
const ClassDir = "class/infiniband"

const (
	// MaxDevices is the most devices read, the first in name order: a Spark
	// has four, a server's adapters and their virtual functions hundreds.
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

// Link is a PCIe link's width in lanes and speed in transfers/s; 0 if unknown.
type Link struct {
	Width    float64
	Transfer float64
}

// Port is one port of an RDMA device.
type Port struct {
	Number    string // the port's number, as its directory names it ("1")
	LinkLayer string // "Ethernet" (RoCE) or "InfiniBand"; "" when unknown
	NetDev    string // the network interface bound to the port; "" when none
	// State and PhysState are the kernel's words ("ACTIVE", "LinkUp").
	State, PhysState string
	// RateBits is the negotiated rate in bits per second; 0 when unknown.
	RateBits float64
	// ReceiveBytes and TransmitBytes are port_rcv_data and port_xmit_data in
	// bytes; floats, since a 64-bit count of words × 4 does not fit 64 bits.
	ReceiveBytes, TransmitBytes *float64
	Errors                      []Counter // ErrorCounters that could be read
	Events                      []Counter // EventCounters that could be read
	HWCounters                  bool      // the port has a hw_counters directory
}

// Known tells whether both state files were read: only then is Up an answer.
func (p Port) Known() bool { return p.State != "" && p.PhysState != "" }

// Up is true when the port is ACTIVE and its physical link LinkUp.
func (p Port) Up() bool { return p.State == "ACTIVE" && p.PhysState == "LinkUp" }

// Device is one RDMA device: on a Spark, one PCIe function of the ConnectX-7.
type Device struct {
	Name string
	// Current and Max are the PCIe link of the function (device/); nil
	// when neither of its attributes could be read.
	Current, Max *Link
	Ports        []Port
}

// Problem is a file that was there but could not be read or parsed.
type Problem = layout.Problem

// Snapshot is one read of the RDMA devices.
type Snapshot struct {
	// RDMA is false when class/infiniband is missing or empty: no RDMA
	// driver, or no device.
	RDMA    bool
	Devices []Device // by name, at most MaxDevices
	// LeftOut counts the devices and ports beyond MaxDevices and MaxPorts;
	// FirstLeftOut names the first of them.
	LeftOut      int
	FirstLeftOut string
	Problems     []Problem
	// Blocked is the read that passed its deadline (hostfs.ErrBlocked);
	// nothing was read after it.
	Blocked *Problem
	// Stale says a device or port of the layout has gone: discover again.
	Stale bool
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
// retransmission and congestion (NVIDIA's "Understanding mlx5 Linux
// Counters", the kernel's Documentation/admin-guide/infiniband).
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

// Read discovers the devices under fsys and reads them once.
func Read(fsys FS) Snapshot { return Discover(fsys).Read(fsys) }

// Layout is the devices and ports a discovery found, which files each has,
// and what does not change while a port exists (its link layer and netdev,
// the function's maximum PCIe link).
type Layout struct {
	rdma         bool
	devices      []deviceFiles
	leftOut      int
	firstLeftOut string
	problems     []Problem
	blocked      *Problem
}

type deviceFiles struct {
	name                       string
	max                        *Link
	currentWidth, currentSpeed string // "" when absent
	ports                      []portFiles
}

type portFiles struct {
	number, linkLayer, netDev string
	// The value files, "" when absent; errors and events by kernel name.
	state, physState, rate, receive, transmit string
	errors, events                            []counterFile
	hasHWCounters                             bool
}

type counterFile struct{ name, file string }

// absent tells the errors that mean "not there" rather than "unreadable":
// sysfs answers EINVAL or EOPNOTSUPP for a counter the device does not
// implement, and EINVAL for the rate of a port that has none.
func absent(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.EINVAL) ||
		errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENODEV)
}

// Discover walks the RDMA devices in name order. What it could not read is
// reported by every Read of the layout; a read that blocks stops the walk.
func Discover(fsys FS) *Layout {
	t := &layout.Tree{FS: fsys, Absent: absent}
	l := &Layout{}
	var names []string
	for _, e := range t.Entries(ClassDir) {
		if validName(e.Name()) {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	l.rdma = len(names) > 0
	if len(names) > MaxDevices {
		l.leftOut += len(names) - MaxDevices
		l.firstLeftOut = path.Join(ClassDir, names[MaxDevices])
		names = names[:MaxDevices]
	}
	for _, name := range names {
		d, leftOut, first := discoverDevice(t, name)
		if leftOut > 0 && l.leftOut == 0 {
			l.firstLeftOut = first
		}
		l.leftOut += leftOut
		if t.Blocked != nil {
			break
		}
		l.devices = append(l.devices, d)
	}
	l.problems, l.blocked = t.Problems, t.Blocked
	if l.blocked != nil {
		l.devices = nil
	}
	return l
}

// Empty tells a layout without devices, whose Read reads nothing.
func (l *Layout) Empty() bool { return len(l.devices) == 0 }

// LeftOut is Snapshot.LeftOut and FirstLeftOut.
func (l *Layout) LeftOut() (n int, first string) { return l.leftOut, l.firstLeftOut }

func discoverDevice(t *layout.Tree, name string) (d deviceFiles, leftOut int, firstLeftOut string) {
	dir := path.Join(ClassDir, name)
	pci := path.Join(dir, "device")
	d.name = name
	d.max = link(t, path.Join(pci, "max_link_width"), path.Join(pci, "max_link_speed"))
	if has, ok := listed(t, pci); ok {
		d.currentWidth = ifListed(has, pci, "current_link_width")
		d.currentSpeed = ifListed(has, pci, "current_link_speed")
	}

	var ports []int
	for _, e := range t.Entries(path.Join(dir, "ports")) {
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
	var netdevs []string
	for _, e := range t.Entries(path.Join(pci, "net")) {
		if ValidNetDev(e.Name()) {
			netdevs = append(netdevs, e.Name())
		}
	}
	for _, n := range ports {
		d.ports = append(d.ports, discoverPort(t, dir, strconv.Itoa(n), netdevs))
	}
	return d, leftOut, firstLeftOut
}

func link(t *layout.Tree, width, speed string) *Link {
	var l Link
	l.Width, _ = parsedIf(t, width, ParseLinkWidth)
	l.Transfer, _ = parsedIf(t, speed, ParseLinkSpeed)
	if l.Width == 0 && l.Transfer == 0 {
		return nil
	}
	return &l
}

func discoverPort(t *layout.Tree, dev, number string, netdevs []string) portFiles {
	dir := path.Join(dev, "ports", number)
	p := portFiles{number: number}
	p.linkLayer, _ = layout.Parsed(t, path.Join(dir, "link_layer"), ParseWord)
	// The netdev of the port's first GID (the port's own address), else
	// the function's one interface: mlx5 binds one netdev per function.
	if v, ok := layout.Parsed(t, path.Join(dir, "gid_attrs", "ndevs", "0"), ParseNetDev); ok {
		p.netDev = v
	} else if len(netdevs) == 1 {
		p.netDev = netdevs[0]
	}
	if has, ok := listed(t, dir); ok {
		p.state = ifListed(has, dir, "state")
		p.physState = ifListed(has, dir, "phys_state")
		p.rate = ifListed(has, dir, "rate")
	}
	counters := path.Join(dir, "counters")
	if has, ok := listed(t, counters); ok {
		p.receive = ifListed(has, counters, "port_rcv_data")
		p.transmit = ifListed(has, counters, "port_xmit_data")
		p.errors = filter(ErrorCounters, has, counters)
	}
	hw := path.Join(dir, "hw_counters")
	if has, ok := listed(t, hw); ok {
		p.hasHWCounters = true
		p.events = filter(EventCounters, has, hw)
	}
	return p
}

func listed(t *layout.Tree, dir string) (map[string]bool, bool) {
	entries, ok := t.Dir(dir)
	if !ok {
		return nil, false
	}
	names := make(map[string]bool, len(entries))
	for _, e := range entries {
		names[e.Name()] = true
	}
	return names, true
}

func ifListed(has map[string]bool, dir, name string) string {
	if has[name] {
		return path.Join(dir, name)
	}
	return ""
}

func filter(names []string, listed map[string]bool, dir string) []counterFile {
	var out []counterFile
	for _, n := range names {
		if listed[n] {
			out = append(out, counterFile{n, path.Join(dir, n)})
		}
	}
	return out
}

// Read reads the values of the layout's files. After a read that blocks
// nothing more is read, and the snapshot has no devices.
func (l *Layout) Read(fsys FS) Snapshot {
	s := Snapshot{RDMA: l.rdma, LeftOut: l.leftOut, FirstLeftOut: l.firstLeftOut}
	if l.blocked != nil {
		s.Blocked, s.Stale = l.blocked, true
		return s
	}
	t := &layout.Tree{FS: fsys, Absent: func(err error) bool {
		if layout.Gone(err) {
			s.Stale = true
		}
		return absent(err)
	}}
	for _, df := range l.devices {
		d := Device{Name: df.name, Max: df.max}
		d.Current = link(t, df.currentWidth, df.currentSpeed)
		for _, pf := range df.ports {
			d.Ports = append(d.Ports, pf.read(t))
		}
		s.Devices = append(s.Devices, d)
	}
	s.Problems = append(slices.Clone(l.problems), t.Problems...)
	if t.Blocked != nil {
		s.Blocked, s.Devices, s.Stale = t.Blocked, nil, true
	}
	return s
}

// parsedIf is layout.Parsed of name, when the layout has it.
func parsedIf[T any](t *layout.Tree, name string, parse func([]byte) (T, error)) (T, bool) {
	if name == "" {
		var zero T
		return zero, false
	}
	return layout.Parsed(t, name, parse)
}

func (pf *portFiles) read(t *layout.Tree) Port {
	p := Port{Number: pf.number, LinkLayer: pf.linkLayer, NetDev: pf.netDev, HWCounters: pf.hasHWCounters}
	p.State, _ = parsedIf(t, pf.state, ParseState)
	p.PhysState, _ = parsedIf(t, pf.physState, ParseState)
	p.RateBits, _ = parsedIf(t, pf.rate, ParseRate)
	// The data counters count 32-bit words (the IBTA's PortXmitData and
	// PortRcvData "divided by 4").
	if v, ok := parsedIf(t, pf.receive, ParseCounter); ok {
		p.ReceiveBytes = wordsToBytes(v)
	}
	if v, ok := parsedIf(t, pf.transmit, ParseCounter); ok {
		p.TransmitBytes = wordsToBytes(v)
	}
	p.Errors = counters(t, pf.errors)
	p.Events = counters(t, pf.events)
	return p
}

// wordsToBytes converts before it multiplies: a count of 2^62 words or
// more would wrap to a false reset in uint64.
func wordsToBytes(words uint64) *float64 {
	b := float64(words) * 4
	return &b
}

func counters(t *layout.Tree, files []counterFile) []Counter {
	var out []Counter
	for _, f := range files {
		if v, ok := layout.Parsed(t, f.file, ParseCounter); ok {
			out = append(out, Counter{f.name, v})
		}
	}
	return out
}
