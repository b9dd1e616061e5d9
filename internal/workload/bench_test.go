package workload

import (
	"github.com/spark-exporter/spark_exporter/internal/hostfs"
	"io/fs"
	"os"
	"testing"

	"github.com/prometheus/procfs"

	"github.com/spark-exporter/spark_exporter/internal/testing/cputime"
	"github.com/spark-exporter/spark_exporter/internal/testing/fakeproc"
)

// BenchmarkScan scans a busy host's /proc (fakeproc.Busy) of 100, 1,000
// and 5,000 processes, and this machine's own. "first" is a scan with
// nothing remembered (every command line read: the exporter's first
// scrape), "steady" a scan of processes all seen before (every later
// scrape). reader=fs is the same scan reading through os.DirFS and
// os.ReadFile, as it did before hostfs.Processes: what that buys.
func BenchmarkScan(b *testing.B) {
	trees := []struct {
		name string
		root func(b *testing.B) string
	}{
		{"procs=100", func(b *testing.B) string { return fakeproc.WriteTree(b, fakeproc.Busy(100)...) }},
		{"procs=1000", func(b *testing.B) string { return fakeproc.WriteTree(b, fakeproc.Busy(1000)...) }},
		{"procs=5000", func(b *testing.B) string { return fakeproc.WriteTree(b, fakeproc.Busy(5000)...) }},
		{"procs=host", func(*testing.B) string { return "/proc" }},
	}
	readers := []struct {
		name string
		new  func(root string) *Scanner
	}{
		{"reader=dir", func(root string) *Scanner { return NewScanner(hostfs.New(root), nil) }},
		{"reader=fs", func(root string) *Scanner { return newScanner(fsFiles{os.DirFS(root)}, nil) }},
	}
	for _, tree := range trees {
		for _, r := range readers {
			b.Run(tree.name+"/"+r.name+"/first", func(b *testing.B) {
				root := tree.root(b)
				cputime.Loop(b, func() {
					s := r.new(root)
					if _, err := s.Scan(b.Context()); err != nil {
						b.Fatal(err)
					}
					s.Close()
				})
			})
			b.Run(tree.name+"/"+r.name+"/steady", func(b *testing.B) {
				s := r.new(tree.root(b))
				b.Cleanup(func() { s.Close() })
				if _, err := s.Scan(b.Context()); err != nil {
					b.Fatal(err)
				}
				cputime.Loop(b, func() {
					if _, err := s.Scan(b.Context()); err != nil {
						b.Fatal(err)
					}
				})
			})
		}
	}
}

// BenchmarkReadStat compares this package's stat parser with
// prometheus/procfs's, each reading the same file.
func BenchmarkReadStat(b *testing.B) {
	root := b.TempDir()
	vllmServer.Write(b, root)
	b.Run("own", func(b *testing.B) {
		proc := os.DirFS(root)
		for b.Loop() {
			data, err := fs.ReadFile(proc, "2101/stat")
			if err != nil {
				b.Fatal(err)
			}
			if _, err := parseStat(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("procfs", func(b *testing.B) {
		pfs, err := procfs.NewFS(root)
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			p, err := pfs.Proc(2101)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := p.Stat(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkReadListeners is what finding the host's loopback listeners
// costs a scan with an engine in it, on this machine's kernel: the
// sock_diag dump of the TCP sockets in LISTEN, and /proc/net/tcp and tcp6
// read to their last listener, as before it (and still where the kernel
// has no inet_diag). Each read of those files walks every bucket of the
// established hash, whose size the machine's memory sets.
func BenchmarkReadListeners(b *testing.B) {
	all := func(Listener) bool { return true }
	b.Run("sock_diag", func(b *testing.B) {
		cputime.Loop(b, func() {
			if _, err := diagListeners(all); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("files", func(b *testing.B) {
		cputime.Loop(b, func() {
			var err error
			for _, name := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
				if _, err = readListeners(name, all, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}
