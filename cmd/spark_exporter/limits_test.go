package main

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/spark-exporter/spark_exporter/internal/testing/fakeproc"
	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
)

// Issue 28: what runs out — descriptors, connections — under a bounded
// exporter.

// startLimited starts the exporter under prlimit with at most files
// descriptors (soft and hard: Go raises the soft limit to the hard one).
func startLimited(t *testing.T, files int, args ...string) *testexporter.Process {
	t.Helper()
	prlimit, err := exec.LookPath("prlimit")
	if err != nil {
		t.Skip("no prlimit (util-linux):", err)
	}
	limit := "--nofile=" + strconv.Itoa(files) + ":" + strconv.Itoa(files)
	argv := append(strings.Fields(os.Getenv("SPARK_TEST_EXEC_WRAPPER")), testexporter.Binary(t), "--web.listen-address=127.0.0.1:0")
	return testexporter.StartCommand(t, exec.Command(prlimit, append(append([]string{limit, "--"}, argv...), args...)...), nil)
}

// Issue 28, item 1: 3,000 processes under a 1,024-descriptor limit. The
// scan rereads every known process's stat in one batch; the batch holds
// no more descriptors than its budget, so every scrape sees every
// process: the inference count holds, nothing reads as unreadable, and
// the collector succeeds.
func TestWorkloadsScanUnderADescriptorLimit(t *testing.T) {
	procs := fakeproc.Busy(3000)
	want := 0
	for _, p := range procs {
		if p.Comm == "vllm" {
			want++
		}
	}
	root := fakeproc.WriteTree(t, procs...)
	p := startLimited(t, 1024, "--path.procfs="+root, "--path.sysfs="+sysFixture(t, "spark"), noGPU,
		"--no-collector.thermal", "--collector.workloads")
	for scrape := range 6 {
		m := boundedGet(t, p, "/metrics?collect[]=workloads")
		inference, _ := value(m, `spark_workloads{role="inference"}`)
		unreadable, _ := value(m, "spark_workload_unreadable_processes")
		if success(m, "workloads") != 1 || int(inference) != want || unreadable != 0 {
			t.Errorf("scrape %d: success %v, %v inference servers (want %d), %v unreadable",
				scrape, success(m, "workloads"), inference, want, unreadable)
		}
	}
	if strings.Contains(p.Logs(), "too many open files") {
		t.Errorf("the exporter ran out of descriptors:\n%s", p.Logs())
	}
}
