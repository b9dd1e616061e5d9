package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
)

// startOnKmsg runs the exporter with path as its kernel log.
func startOnKmsg(t *testing.T, path string) *testexporter.Process {
	t.Helper()
	return testexporter.Start(t, nil, "--path.procfs="+fixtureDir(t, "spark"), "--path.sysfs="+sysFixture(t, "spark"), noGPU,
		"--kernel.kmsg-path="+path)
}

func kernelMetrics(t *testing.T, p *testexporter.Process) string {
	t.Helper()
	return p.Get(t, "/metrics?collect[]=kernel")
}

// kernelCounts is the kernel series of metrics but field_supported and
// the skipped records: the counts a page is made of.
func kernelCounts(metrics string) []string {
	var counts []string
	for _, line := range strings.Split(metrics, "\n") {
		if strings.HasPrefix(line, "spark_kernel_") && !strings.HasPrefix(line, "spark_kernel_field_supported") &&
			!strings.HasPrefix(line, "spark_kernel_log_records_skipped_total") {
			counts = append(counts, line)
		}
	}
	return counts
}

func writeKmsg(t *testing.T, data ...[]byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kmsg")
	if err := os.WriteFile(path, bytes.Join(data, nil), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func readKmsgFixture(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testexporter.Root(t), "testdata", "kmsg", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// The lines the kernel writes for processes that named themselves (or a
// file) after a kernel event, and records a user or a container wrote to
// /dev/kmsg, after the real fixtures: the counts are the real ones alone.
func TestKernelForgedRecordsChangeNoCount(t *testing.T) {
	real := readKmsgFixture(t, "spark.kmsg")
	want := kernelCounts(kernelMetrics(t, startOnKmsg(t, writeKmsg(t, real))))
	m := kernelMetrics(t, startOnKmsg(t, writeKmsg(t, real, readKmsgFixture(t, "forged.kmsg"))))
	if got := kernelCounts(m); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("with forged records:\n%s\nwithout:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if v, ok := testexporter.Value(m, `spark_kernel_log_records_skipped_total{reason="not_kernel"}`); !ok || v != 7 {
		t.Errorf("records of another facility skipped: %v (%v), want 7", v, ok)
	}
}

// 64 Xid codes a user wrote to /dev/kmsg, then the kernel's Xid 79: the
// code that pages is counted, and the user's are not.
func TestKernelUserXidsDoNotHideAPagingXid(t *testing.T) {
	var log []byte
	for code := 1; code <= 64; code++ {
		log = fmt.Appendf(log, "12,%d,%d,-;NVRM: Xid (PCI:0000:01:00): %d, forged\n", code, code, code)
	}
	log = append(log, "4,100,100,-;NVRM: Xid (PCI:000f:01:00): 79, pid=1234, name=python3, GPU has fallen off the bus.\n"...)
	m := kernelMetrics(t, startOnKmsg(t, writeKmsg(t, log)))
	if v, ok := testexporter.Value(m, `spark_kernel_gpu_xid_errors_total{xid="79"}`); !ok || v != 1 {
		t.Errorf(`xid="79" %v (%v), want 1`, v, ok)
	}
	if n := strings.Count(m, "spark_kernel_gpu_xid_errors_total{"); n != 1 {
		t.Errorf("%d Xid series, want only 79's", n)
	}
}

// A --kernel.kmsg-path that never ends or is huge: the exporter listens
// and answers at once, with the log reported unreadable.
func TestKernelLogPathEndlessOrHuge(t *testing.T) {
	for name, create := range map[string]func(t *testing.T, path string){
		"a copy of /dev/zero": func(t *testing.T, path string) {
			if err := syscall.Mknod(path, syscall.S_IFCHR|0o600, 1<<8|5); err != nil {
				t.Skipf("mknod (needs root): %v", err)
			}
		},
		"a 2 GB sparse file": func(t *testing.T, path string) {
			if err := os.WriteFile(path, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(path, 2<<30); err != nil {
				t.Fatal(err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "kmsg")
			create(t, path)
			p := startOnKmsg(t, path)
			if v, ok := testexporter.Value(kernelMetrics(t, p), `spark_kernel_field_supported{field="kmsg"}`); !ok || v != 0 {
				t.Errorf("field_supported %v (%v), want 0", v, ok)
			}
			if strings.Contains(p.Logs(), path) {
				t.Errorf("the log names the path:\n%s", p.Logs())
			}
		})
	}
}

// A FIFO no one writes yet: not reported readable until it is read, and
// followed once a writer comes.
func TestKernelLogFIFOWithoutWriter(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "kmsg")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	p := startOnKmsg(t, fifo)
	if v, ok := testexporter.Value(kernelMetrics(t, p), `spark_kernel_field_supported{field="kmsg"}`); !ok || v != 0 {
		t.Errorf("field_supported %v (%v) before anything was read, want 0", v, ok)
	}
	// Non-blocking: without a reader (an exporter that let go of the
	// FIFO) the open fails rather than waits.
	w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatalf("open the FIFO for writing: %v", err)
	}
	defer w.Close()
	w.WriteString("4,9001,99000000,-;NVRM: Xid (PCI:000f:01:00): 79, GPU has fallen off the bus.\n")
	testexporter.Eventually(t, 30*time.Second, func() bool {
		m := kernelMetrics(t, p)
		v, ok := testexporter.Value(m, `spark_kernel_gpu_xid_errors_total{xid="79"}`)
		s, _ := testexporter.Value(m, `spark_kernel_field_supported{field="kmsg"}`)
		return ok && v == 1 && s == 1
	}, "Xid 79 written by a writer that came after the start counted")
}

// Lines that are no kmsg record, one longer than any, are counted as such.
func TestKernelMalformedRecordsExported(t *testing.T) {
	log := []byte("not a record\n4,1,1,-;" + strings.Repeat("x", 9000) + "\n4,2,2,-;NVRM: Xid (PCI:000f:01:00): 13, x\n")
	m := kernelMetrics(t, startOnKmsg(t, writeKmsg(t, log)))
	for series, want := range map[string]float64{
		`spark_kernel_log_records_skipped_total{reason="malformed"}`: 2,
		`spark_kernel_log_records_skipped_total{reason="overrun"}`:   0,
		`spark_kernel_gpu_xid_errors_total{xid="13"}`:                1,
	} {
		if v, ok := testexporter.Value(m, series); !ok || v != want {
			t.Errorf("%s %v (%v), want %v", series, v, ok, want)
		}
	}
}
