// Package fabric reads the RDMA devices from sysfs (docs/design.md's
// fabric section): on a Spark, the four PCIe functions of its ConnectX-7.
//
// Names go through class/infiniband/<dev>/: the exporter's reads refuse a
// link only as a name's last component. procfs's sysfs.InfiniBandClass fails
// the whole class on one unreadable file and does not read the PCIe link.
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

// FS is the sysfs mount.
type FS = layout.FS

const classDir = "class/infiniband"

// A Spark has four devices of one port each; a server's virtual functions
// can be hundreds, an InfiniBand switch's ports dozens.
const (
	MaxDevices = 32
	MaxPorts   = 4
)

type Counter struct {
	Name  string
	Value uint64
}

// Link is a PCIe link's width in lanes and speed in transfers/s.
type Link struct {
	Width    float64
	Transfer float64
}

// Port is one port of an RDMA device.
type Port struct {
	Number           string
	LinkLayer        string // "Ethernet" (RoCE) or "InfiniBand"
	NetDev           string
	State, PhysState string  // "ACTIVE", "LinkUp"
	RateBits         float64 // bits per second
	// Floats: a 64-bit count of words × 4 does not fit 64 bits.
	ReceiveBytes, TransmitBytes *float64
	Errors                      []Counter
	Events                      []Counter
	HWCounters                  bool
}

// Known: only then is Up an answer.
func (p Port) Known() bool { return p.State != "" && p.PhysState != "" }

func (p Port) Up() bool { return p.State == "ACTIVE" && p.PhysState == "LinkUp" }

// Device is one RDMA device: on a Spark, one PCIe function of the ConnectX-7.
type Device struct {
	Name         string
	Current, Max *Link // nil when neither attribute could be read
	Ports        []Port
}

// Snapshot is one read of the RDMA devices.
type Snapshot struct {
	RDMA         bool // class/infiniband has a device
	Devices      []Device
	LeftOut      int // devices and ports beyond MaxDevices and MaxPorts
	FirstLeftOut string
	Problems     []layout.Problem
	Blocked      *layout.Problem // nothing was read after it
	Stale        bool            // a device or port has gone: discover again
}

// errorCounters are IBTA vol. 1 16.1.3.5's PortCounters, which mlx5 has for RoCE too.
var errorCounters = []string{
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

// EventCounters are the mlx5 hw_counters that tell loss, retransmission and
// congestion (NVIDIA's "Understanding mlx5 Linux Counters").
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

func Read(fsys FS) Snapshot { return Discover(fsys).Read(fsys) }

// Layout is which files a discovery found, and what does not change while a
// port exists.
type Layout struct {
	rdma         bool
	devices      []deviceFiles
	leftOut      int
	firstLeftOut string
	problems     []layout.Problem
	blocked      *layout.Problem
}

type deviceFiles struct {
	name                       string
	max                        *Link
	currentWidth, currentSpeed string
	ports                      []portFiles
}

type portFiles struct {
	number, linkLayer, netDev string
	// Value files, "" when absent.
	state, physState, rate, receive, transmit string
	errors, events                            []counterFile
	hasHWCounters                             bool
}

type counterFile struct{ name, file string }

// absent: sysfs answers EINVAL or EOPNOTSUPP for a counter the device does
// not implement, EINVAL for the rate of a port that has none.
func absent(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.EINVAL) ||
		errors.Is(err, syscall.EOPNOTSUPP) || errors.Is(err, syscall.ENODEV)
}

// Discover walks the RDMA devices in name order; what it could not read,
// every Read reports.
func Discover(fsys FS) *Layout {
	t := &layout.Tree{FS: fsys, Absent: absent}
	l := &Layout{}
	var names []string
	for _, e := range t.Entries(classDir) {
		if validName(e.Name()) {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	l.rdma = len(names) > 0
	if len(names) > MaxDevices {
		l.leftOut += len(names) - MaxDevices
		l.firstLeftOut = path.Join(classDir, names[MaxDevices])
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

func (l *Layout) Empty() bool { return len(l.devices) == 0 }

func (l *Layout) LeftOut() (n int, first string) { return l.leftOut, l.firstLeftOut }

func discoverDevice(t *layout.Tree, name string) (d deviceFiles, leftOut int, firstLeftOut string) {
	dir := path.Join(classDir, name)
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
		if validNetDev(e.Name()) {
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
	l.Width, _ = parsedIf(t, width, parseLinkWidth)
	l.Transfer, _ = parsedIf(t, speed, parseLinkSpeed)
	if l.Width == 0 && l.Transfer == 0 {
		return nil
	}
	return &l
}

func discoverPort(t *layout.Tree, dev, number string, netdevs []string) portFiles {
	dir := path.Join(dev, "ports", number)
	p := portFiles{number: number}
	p.linkLayer, _ = layout.Parsed(t, path.Join(dir, "link_layer"), parseWord)
	// The first GID's netdev, else the function's: mlx5 binds one per function.
	if v, ok := layout.Parsed(t, path.Join(dir, "gid_attrs", "ndevs", "0"), parseNetDev); ok {
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
		p.errors = filter(errorCounters, has, counters)
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

// Read reads the layout's files; after a read that blocks it has no devices.
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

func parsedIf[T any](t *layout.Tree, name string, parse func([]byte) (T, error)) (T, bool) {
	if name == "" {
		var zero T
		return zero, false
	}
	return layout.Parsed(t, name, parse)
}

func (pf *portFiles) read(t *layout.Tree) Port {
	p := Port{Number: pf.number, LinkLayer: pf.linkLayer, NetDev: pf.netDev, HWCounters: pf.hasHWCounters}
	p.State, _ = parsedIf(t, pf.state, parseState)
	p.PhysState, _ = parsedIf(t, pf.physState, parseState)
	p.RateBits, _ = parsedIf(t, pf.rate, parseRate)
	// The data counters count 32-bit words (IBTA: "divided by 4").
	if v, ok := parsedIf(t, pf.receive, parseCounter); ok {
		p.ReceiveBytes = wordsToBytes(v)
	}
	if v, ok := parsedIf(t, pf.transmit, parseCounter); ok {
		p.TransmitBytes = wordsToBytes(v)
	}
	p.Errors = counters(t, pf.errors)
	p.Events = counters(t, pf.events)
	return p
}

// wordsToBytes converts first: 2^62 words would wrap to a false reset in uint64.
func wordsToBytes(words uint64) *float64 {
	b := float64(words) * 4
	return &b
}

func counters(t *layout.Tree, files []counterFile) []Counter {
	var out []Counter
	for _, f := range files {
		if v, ok := layout.Parsed(t, f.file, parseCounter); ok {
			out = append(out, Counter{f.name, v})
		}
	}
	return out
}
