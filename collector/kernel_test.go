package collector

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/go-kit/log"
)

// The kernel collector on the real lines of testdata/kmsg, all in one log:
// every counter as the events it holds, the fixed labels present at 0.
func TestKernelCollector(t *testing.T) {
	var all []byte
	for _, name := range []string{"nvrm-no-memory.kmsg", "xid.kmsg", "oom-global.kmsg", "oom-cgroup.kmsg", "aer.kmsg", "smmu.kmsg"} {
		data, err := os.ReadFile(filepath.Join("..", "testdata", "kmsg", name))
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, data...)
	}
	path := filepath.Join(t.TempDir(), "kmsg")
	if err := os.WriteFile(path, all, 0o600); err != nil {
		t.Fatal(err)
	}
	c := newKernelCollector(path, log.NewNopLogger())
	defer c.Close()
	got, err := collect(t, c)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		`spark_kernel_field_supported{field="kmsg"}`:                  1,
		`spark_kernel_oom_kills_total{constraint="global"}`:           1,
		`spark_kernel_oom_kills_total{constraint="cgroup"}`:           1,
		`spark_kernel_gpu_driver_out_of_memory_total`:                 2,
		`spark_kernel_gpu_xid_errors_total{xid="13"}`:                 2,
		`spark_kernel_gpu_xid_errors_total{xid="31"}`:                 2,
		`spark_kernel_gpu_xid_errors_total{xid="32"}`:                 1,
		`spark_kernel_gpu_xid_errors_total{xid="43"}`:                 2,
		`spark_kernel_gpu_xid_errors_total{xid="79"}`:                 1,
		`spark_kernel_pcie_aer_errors_total{severity="corrected"}`:    1,
		`spark_kernel_pcie_aer_errors_total{severity="nonfatal"}`:     1,
		`spark_kernel_pcie_aer_errors_total{severity="fatal"}`:        1,
		`spark_kernel_smmu_timeouts_total`:                            3,
		`spark_kernel_log_records_skipped_total{reason="overrun"}`:    0,
		`spark_kernel_log_records_skipped_total{reason="malformed"}`:  0,
		`spark_kernel_log_records_skipped_total{reason="not_kernel"}`: 0,
	}
	if len(got) != len(want) {
		t.Errorf("got %d series, want %d: %v", len(got), len(want), got)
	}
	for name, v := range want {
		if got[name] != v {
			t.Errorf("%s = %v, want %v", name, got[name], v)
		}
	}
}

// Without the log (no CAP_SYSLOG, here a missing file), the collector
// succeeds with only the supported series at 0.
func TestKernelCollectorUnreadable(t *testing.T) {
	c := newKernelCollector(filepath.Join(t.TempDir(), "absent"), log.NewNopLogger())
	defer c.Close()
	got, err := collect(t, c)
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	if len(got) != 1 || got[`spark_kernel_field_supported{field="kmsg"}`] != 0 {
		t.Errorf("got %v, want only the supported series at 0", got)
	}
}
