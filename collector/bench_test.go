package collector

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spark-exporter/spark_exporter/internal/gpu"
	"github.com/spark-exporter/spark_exporter/internal/gpu/readings"
	"github.com/spark-exporter/spark_exporter/internal/gpu/thermalsampler"
	"github.com/spark-exporter/spark_exporter/internal/hostfs"
	"github.com/spark-exporter/spark_exporter/internal/testing/cputime"
	"github.com/spark-exporter/spark_exporter/internal/testing/fakeproc"
	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
)

// The benchmarks below measure one Update of each collector as a scrape
// runs it, metrics built and sent included; docs/performance.md has the
// figures. Each reports the process's CPU time per Update (cpu-ns/op)
// beside the wall time, and allocations with -benchmem.

// drain runs c.Update as the registry does, with the metrics consumed.
func drain(b *testing.B, c Collector) {
	ch := make(chan prometheus.Metric, 64)
	done := make(chan struct{})
	go func() {
		for range ch {
		}
		close(done)
	}()
	b.Cleanup(func() { close(ch); <-done })
	cputime.Loop(b, func() {
		if err := c.Update(context.Background(), ch); err != nil && err != errNoData {
			b.Fatal(err)
		}
	})
}

// poolTrees are the /proc trees the pool benchmarks read: the Spark fixture
// (files on disk) and, where it has PSI, this machine's own /proc, whose
// files the kernel writes on each read.
func poolTrees(b *testing.B) map[string]string {
	trees := map[string]string{"fixture": fixtures}
	if _, err := os.Stat("/proc/pressure/memory"); err == nil {
		trees["host"] = "/proc"
	}
	return trees
}

// BenchmarkPool is the pool collector; BenchmarkPoolRaw the least any pool
// reader does, the baseline it is held to (at most twice as costly).
func BenchmarkPool(b *testing.B) {
	for name, tree := range poolTrees(b) {
		b.Run("proc="+name, func(b *testing.B) {
			c, err := newPoolCollector(hostfs.New(tree), 4*gib, nopLogger())
			if err != nil {
				b.Fatal(err)
			}
			drain(b, c)
		})
	}
}

func BenchmarkPoolRaw(b *testing.B) {
	for name, tree := range poolTrees(b) {
		b.Run("proc="+name, func(b *testing.B) {
			files := []string{"meminfo", "vmstat", "pressure/memory"}
			var sink uint64
			cputime.Loop(b, func() {
				for _, f := range files {
					data, err := os.ReadFile(filepath.Join(tree, f))
					if err != nil {
						b.Fatal(err)
					}
					sink += rawParse(data)
				}
			})
			if sink == 0 {
				b.Fatal("nothing parsed")
			}
		})
	}
}

// rawParse is a minimal parse of meminfo, vmstat or PSI: every line's
// first number after its name (PSI: its total=), summed so that the work
// cannot be optimised away.
func rawParse(data []byte) uint64 {
	var sum uint64
	for len(data) > 0 {
		var line []byte
		line, data, _ = bytes.Cut(data, []byte{'\n'})
		if _, total, ok := bytes.Cut(line, []byte("total=")); ok {
			line = total
		} else if _, rest, ok := bytes.Cut(line, []byte{' '}); ok {
			line = bytes.TrimLeft(rest, " ")
		}
		end := bytes.IndexByte(line, ' ')
		if end < 0 {
			end = len(line)
		}
		v, _ := strconv.ParseUint(string(line[:end]), 10, 64)
		sum += v
	}
	return sum
}

// BenchmarkWorkloads is the workloads collector in steady state (every
// process seen before) on a busy host's /proc.
func BenchmarkWorkloads(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run("procs="+strconv.Itoa(n), func(b *testing.B) {
			c := newWorkloadsCollector(hostfs.New(fakeproc.WriteTree(b, fakeproc.Busy(n)...)), nil, nopLogger())
			drain(b, c)
		})
	}
}

// BenchmarkGPU is the gpu collector on the GB10 stand-in library, loaded
// through go-nvml as the real one is: reading NVML on every scrape
// (--gpu.max-age=0), and served a recent reading.
func BenchmarkGPU(b *testing.B) {
	client := gpu.New(gpu.Options{Library: testexporter.StandInNVML(b)})
	if !client.Up() {
		b.Fatal("the stand-in NVML did not initialise")
	}
	b.Cleanup(func() { client.Close() })
	for _, bc := range []struct {
		name   string
		maxAge time.Duration
	}{
		{"nvml=read", 0},
		{"nvml=recent", time.Hour},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c, err := newGPUCollector(client, time.Second, bc.maxAge, hostfs.New(fixtures), nopLogger())
			if err != nil {
				b.Fatal(err)
			}
			drain(b, c)
		})
	}
}

// BenchmarkThermal is the thermal collector's Update with a full window:
// the verdict is worked out by the sampler, so a scrape only reports it.
func BenchmarkThermal(b *testing.B) {
	src := &fakeSource{}
	src.set([]readings.Reading{reading(0, 90, 100, 0.98)}, nil)
	sampler := thermalsampler.NewSampler(src, oneMinute(), "", nopLogger())
	for i := range 10 {
		sampler.Sample(context.Background(), tick(i))
	}
	c := newThermalCollector(sampler)
	drain(b, c)
}

// BenchmarkPlatform is the platform collector on the Spark /sys fixture
// (spbm included: 26 temperatures, rails and limits, about 90 files) and,
// for comparison, on this machine's own /sys.
func BenchmarkPlatform(b *testing.B) {
	for name, tree := range map[string]string{"fixture": sysFixture("spark"), "host": "/sys"} {
		b.Run("sys="+name, func(b *testing.B) {
			c := newPlatformCollector(tree, nopLogger())
			drain(b, c)
		})
	}
}

// BenchmarkFabric is the fabric collector on the healthy two-Spark fixture
// (four functions, one port each: 4 listings of the class and ports, about
// 45 files a function), on the Spark fixture without RDMA devices (one
// listing that finds nothing), and on this machine's own /sys.
func BenchmarkFabric(b *testing.B) {
	for _, bc := range []struct{ name, tree string }{
		{"sys=four-functions", sysFixture("spark-fabric")},
		{"sys=no-rdma", sysFixture("spark")},
		{"sys=host", "/sys"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			drain(b, newFabricCollector(bc.tree, nopLogger()))
		})
	}
}
