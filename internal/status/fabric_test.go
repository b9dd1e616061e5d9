package status

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/collected"
	"github.com/spark-exporter/spark_exporter/internal/fabric"
)

// fabricReadings is two readings of a fabric fixture tree, gap apart: the
// later one with both counters of each port that is up grown by grow
// bytes; only the later one when gap is 0.
func fabricReadings(t testing.TB, tree string, gap time.Duration, grow float64) *collected.Fabric {
	t.Helper()
	read := func() fabric.Snapshot {
		s := fabric.Read(os.DirFS(filepath.Join("..", "..", "testdata", "sys", tree)).(fabric.FS))
		if !s.RDMA || len(s.Problems) != 0 || s.Blocked != nil {
			t.Fatalf("%s: %+v", tree, s)
		}
		return s
	}
	prev, latest := read(), read()
	for _, d := range latest.Devices {
		for _, p := range d.Ports {
			if p.Up() {
				*p.ReceiveBytes += grow
				*p.TransmitBytes += grow
			}
		}
	}
	f := &collected.Fabric{Latest: collected.FabricReading{At: now, Snapshot: latest}}
	if gap > 0 {
		f.Previous = &collected.FabricReading{At: now.Add(-gap), Snapshot: prev}
	}
	return f
}

// The fabric line from the fixture trees: ports up of ports, the rates of
// the ports up, the traffic between the two readings, and the lowest PCIe
// link, flagged when below its maximum; no traffic from one reading, and
// no line without RDMA devices.
func TestFabricLine(t *testing.T) {
	for _, c := range []struct {
		name  string
		in    *collected.Fabric
		state string
		text  string
	}{
		// Two ports up, each moving 5.5 GB/s each way over 10 s: 2.2 GB/s.
		{"healthy", fabricReadings(t, "spark-fabric", 10*time.Second, 5.5e9), "up",
			"2 of 4 functions up, 400 Gb/s negotiated, carrying 2.2 GB/s; PCIe x4 at 32 GT/s"},
		{"healthy, one reading", fabricReadings(t, "spark-fabric", 0, 0), "up",
			"2 of 4 functions up, 400 Gb/s negotiated, traffic not yet measured; PCIe x4 at 32 GT/s"},
		// One port up moving 11 GB/s each way over 2 s: 11 GB/s.
		{"a function down, one at x2", fabricReadings(t, "spark-fabric-degraded", 2*time.Second, 11e9), "degraded",
			"1 of 4 functions up, 200 Gb/s negotiated, carrying 11 GB/s; PCIe x2 of x4 at 32 GT/s"},
		{"no RDMA device", &collected.Fabric{}, "", ""},
		{"collector off", nil, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := collected.State{At: now, Fabric: c.in, Runs: []collected.Run{{Name: "fabric", Success: true}}}
			m := buildModel(BuildInfo{}, st)
			if c.text == "" {
				if m.Fabric != nil {
					t.Fatalf("a fabric line: %+v", m.Fabric)
				}
				return
			}
			if m.Fabric == nil || m.Fabric.State != c.state || m.Fabric.Text != c.text {
				t.Fatalf("fabric %+v, want %s %q", m.Fabric, c.state, c.text)
			}
			if v := newView(m); v.T("fabric.state") != c.text || v.S("fabric.state") != c.state {
				t.Errorf("view %q %q", v.S("fabric.state"), v.T("fabric.state"))
			}
			var b bytes.Buffer
			if err := WriteText(&b, m); err != nil || !strings.Contains(b.String(), "\nFabric   "+c.text+"\n") {
				t.Errorf("report %v:\n%s", err, b.String())
			}
		})
	}
	// A failed run, which stores no reading, shows no line.
	st := collected.State{At: now, Runs: []collected.Run{{Name: "fabric"}}}
	if m := buildModel(BuildInfo{}, st); m.Fabric != nil {
		t.Errorf("a failed collector's line: %+v", m.Fabric)
	}
}

// A counter that went back (the driver reloaded) gives no rate rather
// than a huge or negative one.
func TestFabricTrafficAfterACounterWentBack(t *testing.T) {
	f := fabricReadings(t, "spark-fabric", 10*time.Second, 0)
	for _, d := range f.Previous.Snapshot.Devices {
		for _, p := range d.Ports {
			*p.ReceiveBytes += 1e9
		}
	}
	m := buildModel(BuildInfo{}, collected.State{At: now, Fabric: f, Runs: []collected.Run{{Name: "fabric", Success: true}}})
	if m.Fabric == nil || m.Fabric.TrafficBytesPerSecond != nil || !strings.Contains(m.Fabric.Text, "traffic not yet measured") {
		t.Errorf("fabric %+v", m.Fabric)
	}
}
