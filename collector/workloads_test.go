package collector

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-kit/log"

	"github.com/spark-exporter/spark_exporter/internal/hostfs"
	"github.com/spark-exporter/spark_exporter/internal/workload"
)

const mib = 1 << 20

func workloadsOn(t *testing.T, tree string, patterns ...string) map[string]float64 {
	t.Helper()
	var ps []workload.Pattern
	for _, s := range patterns {
		p, err := workload.ParsePattern(s)
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	got, err := collect(t, newWorkloadsCollector(hostfs.New(tree), ps, nopLogger()))
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// Resident sizes below are the VmRSS lines of the fixtures' status files.
func TestWorkloadsFixtures(t *testing.T) {
	for _, tc := range []struct {
		tree string
		want map[string]float64
	}{
		{
			// vLLM capped at 0.4 beside a trainer: fine (cap ≤ 0.5, docs/design.md).
			tree: "workloads/vllm-capped",
			want: map[string]float64{
				`spark_workloads{role="inference"}`:                                                      1,
				`spark_workloads{role="training"}`:                                                       1,
				`spark_workload_info{container="",kind="vllm",pid="2101",pod_uid="",role="inference"}`:   1,
				`spark_workload_resident_bytes{kind="vllm",pid="2101",role="inference"}`:                 (2900 + 24 + 38*1024) * mib, // server + resource tracker + engine core
				`spark_workload_memory_cap_ratio{kind="vllm",pid="2101",source="flag"}`:                  0.4,
				`spark_workload_info{container="",kind="axolotl",pid="2301",pod_uid="",role="training"}`: 1,
				`spark_workload_resident_bytes{kind="axolotl",pid="2301",role="training"}`:               (590 + 14*1024) * mib, // accelerate + its python
				`spark_workload_unreadable_processes`:                                                    0,
			},
		},
		{
			// vLLM with no flag: vLLM's default 0.9, beside a trainer.
			tree: "workloads/vllm-default",
			want: map[string]float64{
				`spark_workloads{role="inference"}`:                                                       1,
				`spark_workloads{role="training"}`:                                                        1,
				`spark_workload_info{container="",kind="vllm",pid="2101",pod_uid="",role="inference"}`:    1,
				`spark_workload_resident_bytes{kind="vllm",pid="2101",role="inference"}`:                  (2*1024 + 24 + 61*1024) * mib,
				`spark_workload_memory_cap_ratio{kind="vllm",pid="2101",source="default"}`:                0.9,
				`spark_workload_info{container="",kind="torchrun",pid="2301",pod_uid="",role="training"}`: 1,
				`spark_workload_resident_bytes{kind="torchrun",pid="2301",role="training"}`:               (420 + 21*1024) * mib,
				`spark_workload_unreadable_processes`:                                                     0,
			},
		},
		{
			// Ollama has no cap: no cap series.
			tree: "workloads/ollama",
			want: map[string]float64{
				`spark_workloads{role="inference"}`: 1,
				`spark_workloads{role="training"}`:  1,
				`spark_workload_info{container="",kind="ollama",pid="2050",pod_uid="",role="inference"}`: 1,
				`spark_workload_resident_bytes{kind="ollama",pid="2050",role="inference"}`:               (310 + 19*1024) * mib, // serve + runner
				`spark_workload_info{container="",kind="trl",pid="2301",pod_uid="",role="training"}`:     1,
				`spark_workload_resident_bytes{kind="trl",pid="2301",role="training"}`:                   12 * 1024 * mib,
				`spark_workload_unreadable_processes`:                                                    0,
			},
		},
		{
			// Server, engine core, worker and two resource trackers: one
			// workload.
			tree: "workloads/vllm-workers",
			want: map[string]float64{
				`spark_workloads{role="inference"}`:                                                    1,
				`spark_workloads{role="training"}`:                                                     0,
				`spark_workload_info{container="",kind="vllm",pid="2101",pod_uid="",role="inference"}`: 1,
				`spark_workload_resident_bytes{kind="vllm",pid="2101",role="inference"}`:               (2*1024 + 24 + 1024 + 29*1024 + 23) * mib,
				`spark_workload_memory_cap_ratio{kind="vllm",pid="2101",source="flag"}`:                0.5,
				`spark_workload_unreadable_processes`:                                                  0,
			},
		},
		{
			// 3300's stat and 3301's command line cannot be read.
			tree: "workloads/unreadable",
			want: map[string]float64{
				`spark_workloads{role="inference"}`:                                                    1,
				`spark_workloads{role="training"}`:                                                     0,
				`spark_workload_info{container="",kind="vllm",pid="2101",pod_uid="",role="inference"}`: 1,
				`spark_workload_resident_bytes{kind="vllm",pid="2101",role="inference"}`:               (2*1024 + 24 + 20*1024) * mib,
				`spark_workload_memory_cap_ratio{kind="vllm",pid="2101",source="flag"}`:                0.3,
				`spark_workload_unreadable_processes`:                                                  2,
			},
		},
		{
			// 3400 and 3401 exited mid-scan, and so did the engine core
			// before its memory was read: left out, not unreadable.
			tree: "workloads/exiting",
			want: map[string]float64{
				`spark_workloads{role="inference"}`:                                                    1,
				`spark_workloads{role="training"}`:                                                     0,
				`spark_workload_info{container="",kind="vllm",pid="2101",pod_uid="",role="inference"}`: 1,
				`spark_workload_resident_bytes{kind="vllm",pid="2101",role="inference"}`:               (2*1024 + 24) * mib,
				`spark_workload_memory_cap_ratio{kind="vllm",pid="2101",source="flag"}`:                0.3,
				`spark_workload_unreadable_processes`:                                                  0,
			},
		},
	} {
		t.Run(tc.tree, func(t *testing.T) {
			compare(t, workloadsOn(t, filepath.Join("../testdata/proc", tc.tree)), tc.want)
		})
	}
}

func TestWorkloadsOnSparkFixture(t *testing.T) {
	compare(t, workloadsOn(t, fixtures), map[string]float64{
		`spark_workloads{role="inference"}`:                                                    1,
		`spark_workloads{role="training"}`:                                                     1,
		`spark_workload_info{container="",kind="vllm",pid="2101",pod_uid="",role="inference"}`: 1,
		`spark_workload_resident_bytes{kind="vllm",pid="2101",role="inference"}`:               (2900 + 24 + 38*1024) * mib,
		`spark_workload_memory_cap_ratio{kind="vllm",pid="2101",source="flag"}`:                0.4,
		`spark_workload_info{container="",kind="trl",pid="2301",pod_uid="",role="training"}`:   1,
		`spark_workload_resident_bytes{kind="trl",pid="2301",role="training"}`:                 (610 + 17*1024) * mib,
		`spark_workload_unreadable_processes`:                                                  0,
	})
}

// Without workloads both roles still report 0: a count known to exist.
func TestWorkloadsNoneFound(t *testing.T) {
	compare(t, workloadsOn(t, "../testdata/proc/oldkernel"), map[string]float64{
		`spark_workloads{role="inference"}`:   0,
		`spark_workloads{role="training"}`:    0,
		`spark_workload_unreadable_processes`: 0,
	})
}

func TestWorkloadsUserPattern(t *testing.T) {
	got := workloadsOn(t, "../testdata/proc/workloads/vllm-default", `training:lora_script:python3 -u train_lora\.py`)
	// The script's process matches the pattern, but belongs to torchrun,
	// its matched ancestor: still one training workload.
	if got[`spark_workloads{role="training"}`] != 1 || got[`spark_workload_info{container="",kind="torchrun",pid="2301",pod_uid="",role="training"}`] != 1 {
		t.Errorf("got %v", got)
	}
	got = workloadsOn(t, "../testdata/proc/workloads/vllm-default", `inference:openai_server:-m vllm\.entrypoints`)
	if got[`spark_workload_info{container="",kind="openai_server",pid="2101",pod_uid="",role="inference"}`] != 1 {
		t.Errorf("the user pattern did not take precedence: %v", got)
	}
}

func TestWorkloadsListingFails(t *testing.T) {
	c := newWorkloadsCollector(hostfs.New(filepath.Join(t.TempDir(), "gone")), nil, nopLogger())
	got, err := collect(t, c)
	if err == nil || !strings.Contains(err.Error(), "listing processes") {
		t.Fatalf("error %v, want a listing failure", err)
	}
	if len(got) != 0 {
		t.Errorf("a failed scan sent %d series", len(got))
	}
}

// A garbled cap is logged once at debug level, by pid and kind, never with
// the value, which may be a secret pasted in the wrong place.
func TestWorkloadsBadCapLoggedOnceWithoutTheValue(t *testing.T) {
	tree := t.TempDir()
	const secret = "sk-live-PastedInTheWrongPlace"
	dir := filepath.Join(tree, "2101")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{
		"stat":    "2101 (vllm) S 1 2101 1 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 23 0 4817734 0 0\n",
		"status":  "Name:\tvllm\nVmRSS:\t 1024 kB\n",
		"cmdline": "vllm\x00serve\x00m\x00--gpu-memory-utilization\x00" + secret + "\x00",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var logs bytes.Buffer
	c := newWorkloadsCollector(hostfs.New(tree), nil, log.NewLogfmtLogger(&logs))
	for range 2 {
		got, err := collect(t, c)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := got[`spark_workload_memory_cap_ratio{kind="vllm",pid="2101",source="flag"}`]; ok {
			t.Error("a cap series for an unreadable cap")
		}
	}
	out := logs.String()
	if strings.Count(out, "no memory cap exported") != 1 || !strings.Contains(out, "pid=2101") {
		t.Errorf("want one log line naming pid 2101, got:\n%s", out)
	}
	if strings.Contains(out, secret) {
		t.Errorf("the log carries the command line:\n%s", out)
	}
}
