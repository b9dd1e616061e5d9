package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
)

// A command line is parsed and dropped: the secrets it carries (and the
// environment's) never reach /metrics or the log, at debug level too, even
// where a secret sits in the cap flag itself and makes it unreadable.
func TestCommandLineSecretsNeverLeak(t *testing.T) {
	procfs := t.TempDir()
	if err := os.CopyFS(procfs, os.DirFS(fixtureDir(t, "spark"))); err != nil {
		t.Fatal(err)
	}
	// The Spark tree's vLLM server carries --api-key, its trainer an
	// HF_TOKEN in environ. Add a server whose cap flag got a secret pasted
	// into it, and one that a user pattern finds.
	const pastedSecret = "sk-live-PastedIntoTheCapFlag"
	for pid, cmdline := range map[string]string{
		"3500": "python3\x00-m\x00sglang.launch_server\x00--model-path\x00m\x00--mem-fraction-static=" + pastedSecret + "\x00--api-key\x00" + pastedSecret + "\x00",
		"3600": "/opt/serve-wrapper\x00--token\x00" + pastedSecret + "\x00",
	} {
		dir := filepath.Join(procfs, pid)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		files := map[string]string{
			"stat":    pid + " (python3) S 2010 " + pid + " 2010 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 9 0 4950000 0 0\n",
			"status":  "Name:\tpython3\nVmRSS:\t 2097152 kB\n",
			"cmdline": cmdline,
			"environ": "OPENAI_API_KEY=" + pastedSecret + "\x00",
		}
		for name, data := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	secrets := []string{
		"sk-spark-FixtureCmdlineSecretDoNotLeak", // --api-key in testdata/proc/spark/2101/cmdline
		"hf_FixtureEnvSecretDoNotLeak0000",       // testdata/proc/spark/*/environ
		pastedSecret,
		"DoNotLeak", "PastedInto", // any part of them
	}

	p := testexporter.Start(t, nil, "--path.procfs="+procfs, "--log.level=debug",
		"--workloads.match=inference:wrapped_server:^/opt/serve-wrapper ")
	metrics := p.Get(t, "/metrics")
	// The scan did see the processes whose command lines hold the secrets.
	for _, series := range []string{
		`spark_workload_info{container="",kind="vllm",pid="2101",pod_uid="",role="inference"} 1`,
		`spark_workload_info{container="",kind="sglang",pid="3500",pod_uid="",role="inference"} 1`,
		`spark_workload_info{container="",kind="wrapped_server",pid="3600",pod_uid="",role="inference"} 1`,
	} {
		if !strings.Contains(metrics, series) {
			t.Errorf("/metrics lacks %s", series)
		}
	}
	// The unreadable cap was logged; wait for the line to come through the
	// pipe, then stop the exporter so that every line is in.
	p.WaitLog(t, "no memory cap exported")
	p.Stop(t)
	logs := p.Logs()
	if !strings.Contains(logs, "no memory cap exported") || !strings.Contains(logs, "pid=3500") {
		t.Errorf("the unreadable cap of pid 3500 was not logged:\n%s", logs)
	}
	for _, s := range secrets {
		if strings.Contains(metrics, s) {
			t.Errorf("/metrics carries %q", s)
		}
		if strings.Contains(logs, s) {
			t.Errorf("the log carries %q", s)
		}
	}
}
