package main

import (
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/flight"
	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
)

// goldenFlightRing writes a ring that wrapped: the end of an unclean boot
// (memory falling, a growing workload, OOM kills, an Xid, pressure), then
// a boot that stopped cleanly, one slot damaged. It returns the file and a /proc whose boot
// id is the second boot's.
func goldenFlightRing(t *testing.T) (file, procfs string) {
	t.Helper()
	file = filepath.Join(t.TempDir(), "flight")
	r, err := flight.Open(file, 4096+500*flight.SlotSize)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 3, 1, 22, 0, 0, 0, time.UTC)
	first, second := [16]byte{0xa1}, [16]byte{0xb2}
	for i := range 600 {
		rec := goldenRecord(i, start)
		rec.Boot = first
		if i >= 400 {
			rec.Boot, rec.Time = second, rec.Time.Add(10*time.Minute)
			rec.Clean = i == 599
		}
		if err := r.Append(rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	damage(t, file, 4096+350*flight.SlotSize+40)
	procfs = t.TempDir()
	setBootID(t, procfs, "b2000000-0000-0000-0000-000000000000")
	return file, procfs
}

// damage flips a bit of the file at off.
func damage(t *testing.T, file string, off int64) {
	t.Helper()
	f, err := os.OpenFile(file, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x10
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}

func goldenRecord(i int, start time.Time) flight.Record {
	usable := uint64(100<<30) - uint64(min(i, 399))*uint64(250<<20)
	some, full := uint64(i*i)*50, uint64(i*i)*5
	power := 60 + float64(i%7)
	if i == 399 {
		power = math.NaN()
	}
	var xid []flight.XidCount
	if i >= 390 {
		xid = []flight.XidCount{{Code: 79, Count: 1}}
	}
	return flight.Record{Time: start.Add(time.Duration(i) * 5 * time.Second),
		Pool:     &flight.Pool{Free: usable / 2, Available: usable, Cache: 3 << 30, Usable: &usable},
		Pressure: &flight.Pressure{Some: some, Full: &full},
		GPU:      &flight.GPU{TemperatureCelsius: 55 + float64(i%20), PowerWatts: power, SMClockHertz: 2.1e9, State: "warming"},
		Kernel:   &flight.Kernel{OOMGlobal: uint64(max(0, min(i, 399)-380) / 5), DriverOutOfMemory: uint64(max(0, min(i, 399)-370) / 10), Xid: xid},
		Workloads: []flight.Workload{{Role: "inference", Kind: "vllm", ResidentBytes: 40<<30 + uint64(i)<<24},
			{Role: "training", Kind: "axolotl", ResidentBytes: 8 << 30}}}
}

// report --flight's text, JSON and SVG on a ring that wrapped, for the
// default (the unclean boot's last ten minutes), --last, --from/--to and
// the running boot.
func TestGoldenReportFlight(t *testing.T) {
	file, procfs := goldenFlightRing(t)
	svgFile := filepath.Join(t.TempDir(), "f.svg")
	for _, c := range []struct {
		name string
		args []string
	}{
		{"default", nil},
		{"json", []string{"--json", "--svg", svgFile}},
		{"last", []string{"--last=3m", "--json"}},
		{"range", []string{"--boot=-1", "--from=2026-03-01T22:20:00Z", "--to=2026-03-01T22:25:00Z"}},
		{"running", []string{"--boot=0", "--json"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"--path.procfs=" + procfs, "report", "--flight", file, "--timezone=UTC"}, c.args...)
			out, err := testexporter.Command(t, args...).Output()
			if err != nil {
				t.Fatalf("report %v: %v\n%s", c.args, err, out)
			}
			golden(t, "report-flight-"+c.name+".txt", string(out))
		})
	}
	svg, err := os.ReadFile(svgFile)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "report-flight.svg", string(svg))
}
