package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/hostfs"
	"github.com/spark-exporter/spark_exporter/internal/testing/cputime"
	"github.com/spark-exporter/spark_exporter/internal/testing/otheruser"
	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
)

// BenchmarkScanPerProcess is what each extra idle process on the host
// costs a whole default scrape of the built binary (gzip, OpenMetrics), as
// root and as nobody, against what listing /proc costs per process in the
// same rounds: extra=80 and extra=500 `sleep` processes against none,
// interleaved (SPARK_SCAN_ROUNDS rounds, 15 by default), in a cgroup v2 of
// their own (skipped where none can be made) and in the exporter's. The
// exporter's CPU is the sum of its threads' schedstat. ratio is the
// scrape's cost per extra process over the listing's.
func BenchmarkScanPerProcess(b *testing.B) {
	otheruser.Require(b)
	for _, user := range []string{"root", "nobody"} {
		b.Run("user="+user, func(b *testing.B) {
			p := startBenchExporter(b, user == "nobody")
			for _, extra := range []int{80, 500} {
				for _, cgroup := range []string{"own", "exporter's"} {
					b.Run("extra="+strconv.Itoa(extra)+"/cgroup="+cgroup, func(b *testing.B) {
						dir := ""
						if cgroup == "own" {
							dir = newCgroup(b)
						}
						perProcessCost(b, p, extra, dir)
					})
				}
			}
		})
	}
}

func startBenchExporter(b *testing.B, asNobody bool) *testexporter.Process {
	dir := otheruser.Dir(b)
	nvml := filepath.Join(dir, "nvml.so")
	copyProgram(b, testexporter.StandInNVML(b), nvml)
	return startAs(b, asNobody, "--gpu.nvml-library="+nvml, "--path.sysfs="+sysFixture(b, "spark"))
}

func copyProgram(t testing.TB, from, to string) {
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o755); err != nil {
		t.Fatal(err)
	}
}

// perProcessCost alternates none and extra idle processes, round by
// round; a round's difference is what the extra processes cost. The medians
// of those differences leave out the rounds that a neighbour on the shared
// machine, or the exporter's own background work, made dearer.
func perProcessCost(b *testing.B, p *testexporter.Process, extra int, cgroup string) {
	// 10,000 sightings of an extra process a round, at 80 as at 500: fewer
	// leave the difference inside the machine's noise.
	scrapes := max(20, 10_000/extra)
	rounds := envInt(b, "SPARK_SCAN_ROUNDS", 15)
	pid := p.PID() // setpriv execs the exporter
	var scrape, list []time.Duration
	for b.Loop() {
		for range rounds {
			var s, l [2]time.Duration
			for i, n := range []int{0, extra} {
				stop := idleProcesses(b, n, cgroup)
				for range 3 { // the first sights of each: its cgroup is noted at the second
					scrapeOnce(b, p)
				}
				start := threadsCPU(b, pid)
				for range scrapes {
					scrapeOnce(b, p)
				}
				s[i] = threadsCPU(b, pid) - start
				l[i] = listCPU(b, scrapes)
				stop()
			}
			scrape, list = append(scrape, s[1]-s[0]), append(list, l[1]-l[0])
		}
	}
	per := func(d []time.Duration) float64 { return float64(median(d)) / float64(scrapes*extra) }
	b.ReportMetric(per(scrape), "scrape-ns/process")
	b.ReportMetric(per(list), "list-ns/process")
	b.ReportMetric(per(scrape)/per(list), "ratio")
}

func scrapeOnce(b *testing.B, p *testexporter.Process) {
	req, err := http.NewRequest(http.MethodGet, p.URL+"/metrics", nil)
	if err != nil {
		b.Fatal(err)
	}
	req.Header = prometheusScrape().Header
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("scrape: %s", resp.Status)
	}
}

// idleProcesses starts n sleeps, in cgroup when it is not "" (as systemd
// starts each service and session in a cgroup of its own); stop kills and
// reaps them.
func idleProcesses(b *testing.B, n int, cgroup string) (stop func()) {
	cmds := make([]*exec.Cmd, 0, n)
	stop = func() {
		for _, c := range cmds {
			c.Process.Kill()
			c.Wait()
		}
	}
	for range n {
		c := exec.Command("sleep", "600")
		if err := c.Start(); err != nil {
			stop()
			b.Fatal(err)
		}
		cmds = append(cmds, c)
		if cgroup != "" {
			moveToCgroup(b, cgroup, c.Process.Pid)
		}
	}
	return stop
}

// threadsCPU is the CPU time of every thread of pid, in nanoseconds.
func threadsCPU(b testing.TB, pid int) time.Duration {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		b.Fatal(err)
	}
	var sum time.Duration
	for _, t := range tasks {
		data, err := os.ReadFile(filepath.Join(dir, t.Name(), "schedstat"))
		if err != nil {
			continue // a thread gone meanwhile
		}
		ns, err := strconv.ParseInt(strings.Fields(string(data))[0], 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		sum += time.Duration(ns)
	}
	return sum
}

// listCPU is the CPU time of listing /proc n times as the scan does (the
// benchmark's process is otherwise idle meanwhile).
func listCPU(b *testing.B, n int) time.Duration {
	procs := hostfs.New("/proc").Processes()
	defer procs.Close()
	var ps []hostfs.Process
	start := cputime.Self()
	for range n {
		var err error
		if ps, err = procs.List(context.Background(), ps[:0]); err != nil {
			b.Fatal(err)
		}
	}
	return cputime.Self() - start
}
