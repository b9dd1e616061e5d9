package workload

import (
	"fmt"
	"io/fs"
	"os"
	"testing"

	"github.com/prometheus/procfs"
)

// benchTree writes n processes: a host's usual ones, and among the rest one
// program in fifty a workload (a server or a launcher) with two children.
func benchTree(b *testing.B, n int) string {
	b.Helper()
	procs := []fakeProc{initProc, kthreadd, kworker, loginBash}
	for pid := 10000; len(procs) < n; pid++ {
		p := fakeProc{pid: pid, ppid: 1, comm: "sshd", start: uint64(pid) * 7, rssKB: 6144,
			argv: []string{"sshd: spark@pts/0"}}
		switch {
		case pid%50 == 0:
			p.comm, p.argv = "vllm", vllmServer.argv
		case pid%50 == 25:
			p.comm, p.argv = "accelerate", accelerate.argv
		case pid%50 == 1 || pid%50 == 26:
			p.ppid, p.comm, p.argv = pid-1, "python3", trainer.argv
		case pid%50 == 2 || pid%50 == 27:
			p.ppid, p.comm, p.argv = pid-2, "python3", resourceTracker.argv
		case pid%3 == 0:
			p.ppid, p.comm, p.argv = 2, "kworker/u16:3", nil
		}
		procs = append(procs, p)
	}
	root := b.TempDir()
	for _, p := range procs {
		p.write(b, root)
	}
	return root
}

// BenchmarkScan: "first" is a scan with nothing remembered (every command
// line read: the exporter's first scrape), "steady" a scan of processes all
// seen before (every later scrape).
func BenchmarkScan(b *testing.B) {
	for _, n := range []int{100, 1000, 5000} {
		root := benchTree(b, n)
		proc := os.DirFS(root)
		b.Run(fmt.Sprintf("procs=%d/first", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := NewScanner(proc, nil).Scan(); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("procs=%d/steady", n), func(b *testing.B) {
			s := NewScanner(proc, nil)
			if _, err := s.Scan(); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := s.Scan(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReadStat compares this package's stat parser with
// prometheus/procfs's, each reading the same file.
func BenchmarkReadStat(b *testing.B) {
	root := b.TempDir()
	vllmServer.write(b, root)
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
