package fabric

import (
	"errors"
	"io/fs"
	"math"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"
	"unicode/utf8"

	"github.com/spark-exporter/spark_exporter/internal/hostfs"
)

func fixture(tree string) FS {
	return os.DirFS(filepath.Join("..", "..", "testdata", "sys", tree)).(FS)
}

func TestParseRate(t *testing.T) {
	for in, want := range map[string]float64{
		"200 Gb/sec (4X HDR)\n": 200e9,
		"40 Gb/sec (4X QDR)\n":  40e9,
		"2.5 Gb/sec (1X SDR)\n": 2.5e9,
		"400 Gb/sec (4X NDR)":   400e9,
		"100 Gb/sec":            100e9,
		"0 Gb/sec (1X)":         0,
	} {
		if got, err := parseRate([]byte(in)); err != nil || got != want {
			t.Errorf("ParseRate(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "\n", "200", "200 Mb/sec", "Gb/sec", "-1 Gb/sec", "1e3 Gb/sec", "NaN Gb/sec",
		"Inf Gb/sec", "0x10 Gb/sec", "2. Gb/sec", "200 Gb/sec (4X HDR)\n200 Gb/sec", strings.Repeat("9", 100) + " Gb/sec"} {
		if got, err := parseRate([]byte(in)); err == nil {
			t.Errorf("ParseRate(%q) = %v, want an error", in, got)
		}
	}
}

func TestParseState(t *testing.T) {
	for in, want := range map[string]string{
		"4: ACTIVE\n":       "ACTIVE",
		"1: DOWN\n":         "DOWN",
		"5: LinkUp\n":       "LinkUp",
		"3: Disabled":       "Disabled",
		"2: Polling":        "Polling",
		"5: ACTIVE_DEFER\n": "ACTIVE_DEFER",
	} {
		if got, err := parseState([]byte(in)); err != nil || got != want {
			t.Errorf("ParseState(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "ACTIVE", "4:", ": ACTIVE", "x: ACTIVE", "4: ACT IVE", "4: ACTIVE\n1: DOWN", "4: {x=\"y\"}", "999: ACTIVE"} {
		if got, err := parseState([]byte(in)); err == nil {
			t.Errorf("ParseState(%q) = %q, want an error", in, got)
		}
	}
}

func TestParsePCIeLink(t *testing.T) {
	for in, want := range map[string]float64{"4\n": 4, "2": 2, "16\n": 16} {
		if got, err := parseLinkWidth([]byte(in)); err != nil || got != want {
			t.Errorf("ParseLinkWidth(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"0", "", "-4", "x4", "255", "4.0"} {
		if got, err := parseLinkWidth([]byte(in)); err == nil {
			t.Errorf("ParseLinkWidth(%q) = %v, want an error", in, got)
		}
	}
	for in, want := range map[string]float64{"32.0 GT/s PCIe\n": 32e9, "16.0 GT/s PCIe": 16e9, "2.5 GT/s PCIe": 2.5e9, "8 GT/s\n": 8e9} {
		if got, err := parseLinkSpeed([]byte(in)); err != nil || got != want {
			t.Errorf("ParseLinkSpeed(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"Unknown", "Unknown speed", "0 GT/s", "32.0", "32.0 Gb/s", "", "1e9 GT/s"} {
		if got, err := parseLinkSpeed([]byte(in)); err == nil {
			t.Errorf("ParseLinkSpeed(%q) = %v, want an error", in, got)
		}
	}
}

func TestParseNamesAndCounters(t *testing.T) {
	if n, err := parseCounter([]byte("18446744073709551615\n")); err != nil || n != math.MaxUint64 {
		t.Errorf("the largest counter: %v, %v", n, err)
	}
	for _, in := range []string{"", "-1", "18446744073709551616", "1 2", "0x10"} {
		if _, err := parseCounter([]byte(in)); err == nil {
			t.Errorf("ParseCounter(%q): no error", in)
		}
	}
	if v, err := parseNetDev([]byte("enP2p1s0f0np0\n")); err != nil || v != "enP2p1s0f0np0" {
		t.Errorf("ParseNetDev: %q, %v", v, err)
	}
	for _, in := range []string{"", "a/b", "..", "sixteen-bytes-xx", "en p1", "eth0:1", "é"} {
		if v, err := parseNetDev([]byte(in)); err == nil {
			t.Errorf("ParseNetDev(%q) = %q, want an error", in, v)
		}
	}
	if v, err := parseWord([]byte("InfiniBand\n")); err != nil || v != "InfiniBand" {
		t.Errorf("ParseWord: %q, %v", v, err)
	}
	for name, want := range map[string]bool{"rocep1s0f0": true, "mlx5_0": true, "roceP2p1s0f1": true, "": false,
		".hidden": false, "a b": false, "a\nb": false, strings.Repeat("x", 64): false} {
		if validName(name) != want {
			t.Errorf("validName(%q) = %v", name, !want)
		}
	}
}

// The healthy Spark: four functions, the first port's two up at 200 Gb/s,
// the second port's without a cable; names from the kernel, never paths.
func TestReadHealthySpark(t *testing.T) {
	s := Read(fixture("spark-fabric"))
	if !s.RDMA || s.Blocked != nil || len(s.Problems) != 0 || s.LeftOut != 0 {
		t.Fatalf("RDMA %v, blocked %v, problems %v, left out %d", s.RDMA, s.Blocked, s.Problems, s.LeftOut)
	}
	var names []string
	for _, d := range s.Devices {
		names = append(names, d.Name)
	}
	if got := strings.Join(names, " "); got != "roceP2p1s0f0 roceP2p1s0f1 rocep1s0f0 rocep1s0f1" {
		t.Fatalf("devices %s", got)
	}
	d := s.Devices[2]
	if len(d.Ports) != 1 {
		t.Fatalf("%s: %d ports", d.Name, len(d.Ports))
	}
	p := d.Ports[0]
	if p.Number != "1" || !p.Known() || !p.Up() || p.RateBits != 200e9 || p.NetDev != "enp1s0f0np0" || p.LinkLayer != "Ethernet" || !p.HWCounters {
		t.Errorf("rocep1s0f0 port: %+v", p)
	}
	if p.ReceiveBytes == nil || *p.ReceiveBytes != 4*2864127401 || p.TransmitBytes == nil || *p.TransmitBytes != 4*2911530112 {
		t.Errorf("data counters are not words × 4: %v %v", p.ReceiveBytes, p.TransmitBytes)
	}
	if len(p.Errors) != len(errorCounters) || len(p.Events) != len(EventCounters) {
		t.Errorf("%d error counters, %d events; want %d, %d", len(p.Errors), len(p.Events), len(errorCounters), len(EventCounters))
	}
	if d.Current == nil || *d.Current != (Link{4, 32e9}) || d.Max == nil || *d.Max != (Link{4, 32e9}) {
		t.Errorf("PCIe link %v / %v", d.Current, d.Max)
	}
	if q := s.Devices[3].Ports[0]; q.Up() || q.State != "DOWN" || q.PhysState != "Disabled" {
		t.Errorf("the port without a cable: %+v", q)
	}
}

func TestReadDegradedSpark(t *testing.T) {
	s := Read(fixture("spark-fabric-degraded"))
	byName := map[string]Device{}
	for _, d := range s.Devices {
		byName[d.Name] = d
	}
	if d := byName["rocep1s0f0"]; d.Current == nil || d.Current.Width != 2 || d.Max.Width != 4 {
		t.Errorf("rocep1s0f0 PCIe %v / %v, want x2 of x4", d.Current, d.Max)
	}
	if p := byName["roceP2p1s0f0"].Ports[0]; p.Up() || p.PhysState != "Polling" {
		t.Errorf("roceP2p1s0f0: %+v", p)
	}
}

// A host without RDMA: nothing, and no problem.
func TestReadWithoutRDMA(t *testing.T) {
	for _, tree := range []string{"spark", "x86-server"} {
		if s := Read(fixture(tree)); s.RDMA || len(s.Devices) != 0 || len(s.Problems) != 0 {
			t.Errorf("%s: %+v", tree, s)
		}
	}
}

// mapFS is a tree of the files a device needs, flat (no links).
func device(m fstest.MapFS, name string, ports ...string) {
	dir := path.Join(classDir, name)
	for _, p := range ports {
		m[path.Join(dir, "ports", p, "state")] = &fstest.MapFile{Data: []byte("4: ACTIVE\n")}
		m[path.Join(dir, "ports", p, "phys_state")] = &fstest.MapFile{Data: []byte("5: LinkUp\n")}
	}
}

// Many devices: the first MaxDevices by name, the rest counted; many
// ports: the lowest MaxPorts.
func TestReadIsBounded(t *testing.T) {
	m := fstest.MapFS{}
	for i := range MaxDevices + 5 {
		device(m, "mlx5_"+strings.Repeat("0", 3-len(itoa(i)))+itoa(i), "1")
	}
	device(m, "mlx5_000", "1", "2", "3", "4", "5", "6", "10")
	m[path.Join(classDir, "not a name")] = &fstest.MapFile{Mode: fs.ModeDir}
	s := Read(m)
	if len(s.Devices) != MaxDevices || s.LeftOut != 5+3 {
		t.Fatalf("%d devices, %d left out", len(s.Devices), s.LeftOut)
	}
	if s.FirstLeftOut != "class/infiniband/mlx5_032" {
		t.Errorf("first left out %q", s.FirstLeftOut)
	}
	if s.Devices[0].Name != "mlx5_000" || s.Devices[MaxDevices-1].Name != "mlx5_031" {
		t.Errorf("not the first by name: %s … %s", s.Devices[0].Name, s.Devices[MaxDevices-1].Name)
	}
	var ports []string
	for _, p := range s.Devices[0].Ports {
		ports = append(ports, p.Number)
	}
	if strings.Join(ports, ",") != "1,2,3,4" {
		t.Errorf("ports %v", ports)
	}
}

func itoa(i int) string { return string(rune('0'+i/10)) + string(rune('0'+i%10)) }

// errFS answers name with err.
type errFS struct {
	FS
	name string
	err  error
}

func (e errFS) ReadFile(name string) ([]byte, error) {
	if name == e.name {
		return nil, &fs.PathError{Op: "read", Path: name, Err: e.err}
	}
	return e.FS.ReadFile(name)
}

// An attribute that refuses its reader is a problem, one the device does
// not have (EINVAL, EOPNOTSUPP) is absent, and a read that blocks stops
// everything.
func TestReadErrors(t *testing.T) {
	rate := "class/infiniband/rocep1s0f1/ports/1/rate"
	counter := "class/infiniband/rocep1s0f0/ports/1/counters/symbol_error"
	s := Read(errFS{fixture("spark-fabric"), counter, fs.ErrPermission})
	if len(s.Problems) != 1 || s.Problems[0].File != counter || len(s.Devices) != 4 {
		t.Errorf("problems %v, %d devices", s.Problems, len(s.Devices))
	}
	s = Read(errFS{fixture("spark-fabric"), rate, syscall.EINVAL})
	if len(s.Problems) != 0 || s.Devices[3].Ports[0].RateBits != 0 {
		t.Errorf("EINVAL rate: problems %v, rate %v", s.Problems, s.Devices[3].Ports[0].RateBits)
	}
	s = Read(errFS{fixture("spark-fabric"), rate, &hostfs.BlockedError{}})
	if s.Blocked == nil || s.Blocked.File != rate || len(s.Devices) != 0 {
		t.Errorf("blocked: %v, %d devices", s.Blocked, len(s.Devices))
	}
	if !errors.Is(s.Blocked.Err, hostfs.ErrBlocked) {
		t.Errorf("blocked error %v", s.Blocked.Err)
	}
}

func FuzzParsers(f *testing.F) {
	for _, seed := range []string{"200 Gb/sec (4X HDR)\n", "4: ACTIVE\n", "32.0 GT/s PCIe\n", "4\n", "123\n", "enp1s0f0np0\n", "Ethernet\n"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if v, err := parseRate(data); err == nil && (v < 0 || math.IsInf(v, 0) || math.IsNaN(v)) {
			t.Errorf("ParseRate(%q) = %v", data, v)
		}
		if v, err := parseLinkSpeed(data); err == nil && (v <= 0 || math.IsInf(v, 0) || math.IsNaN(v)) {
			t.Errorf("ParseLinkSpeed(%q) = %v", data, v)
		}
		if v, err := parseLinkWidth(data); err == nil && (v < 1 || v > 32) {
			t.Errorf("ParseLinkWidth(%q) = %v", data, v)
		}
		_, _ = parseCounter(data)
		for _, parse := range []func([]byte) (string, error){parseState, parseWord, parseNetDev} {
			if v, err := parse(data); err == nil && (v == "" || strings.ContainsAny(v, " /\n\x00") || !utf8.ValidString(v)) {
				t.Errorf("%q gave the label %q", data, v)
			}
		}
	})
}

// Any bytes in any one attribute of the healthy Spark: no panic, the other
// devices still read, every label a kernel name.
func FuzzRead(f *testing.F) {
	base := fstest.MapFS{}
	root := filepath.Join("..", "..", "testdata", "sys", "spark-fabric")
	var files []string
	fsys := os.DirFS(root)
	for _, dev := range []string{"rocep1s0f0", "roceP2p1s0f0"} {
		dir := path.Join(classDir, dev)
		_ = fs.WalkDir(fsys, path.Join(dir, "ports"), func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				files = append(files, p)
			}
			return nil
		})
		for _, a := range []string{"current_link_width", "max_link_width", "current_link_speed", "max_link_speed"} {
			files = append(files, path.Join(dir, "device", a))
		}
	}
	for _, name := range files {
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			f.Fatal(err)
		}
		base[name] = &fstest.MapFile{Data: data}
	}
	f.Add(uint(0), []byte("4: ACTIVE\n"))
	f.Add(uint(3), []byte("\xff\xfe"))
	f.Fuzz(func(t *testing.T, which uint, data []byte) {
		m := fstest.MapFS{}
		for k, v := range base {
			m[k] = v
		}
		m[files[which%uint(len(files))]] = &fstest.MapFile{Data: data}
		s := Read(m)
		if len(s.Devices) != 2 {
			t.Fatalf("%d devices", len(s.Devices))
		}
		for _, d := range s.Devices {
			for _, p := range d.Ports {
				for _, label := range []string{p.NetDev, p.LinkLayer, p.State, p.PhysState} {
					if strings.ContainsAny(label, " /\n\x00") {
						t.Errorf("label %q", label)
					}
				}
				if p.RateBits < 0 || math.IsNaN(p.RateBits) {
					t.Errorf("rate %v", p.RateBits)
				}
			}
		}
	})
}
