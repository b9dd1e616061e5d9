package main

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/testing/fakeengine"
	"github.com/spark-exporter/spark_exporter/internal/testing/fakeproc"
	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
)

var unloadLine = regexp.MustCompile(`(?m)^(spark_engine_model_unload_seconds\{[^}]*\}) .*$`)

// A fake vLLM inside a fake Docker cgroup and a fake Ollama on the host,
// found as workloads: the scrape shows each engine's KV cache, requests,
// preemptions, tokens, Ollama's model and its unload time, and the
// container with Docker's name for it; /sd/engines lists both.
func TestEnginesAsWorkloads(t *testing.T) {
	const id = "8dfafdbc3a40f1a5b7d2d4a8bb7c3f9b0e1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e"
	vllm := fakeengine.Start(t, "vllm", fakeengine.Figures{KVCache: 0.97, Running: 6, Waiting: 11, Preemptions: 23,
		PromptTokens: 123456, GenTokens: 65432, Model: "Qwen/Qwen3-32B-AWQ"})
	ollama := fakeengine.Start(t, "ollama", fakeengine.Figures{Model: "llama3.1:70b", ModelBytes: 42e9,
		ExpiresAt: time.Now().Add(10 * time.Minute)})
	server := fakeproc.VLLMServer
	server.Argv = append(server.Argv, "--port", vllm.Port())
	server.Cgroup = "0::/system.slice/docker-" + id + ".scope\n"
	tree := fakeproc.WriteTree(t, fakeproc.Init, fakeproc.LoginBash, server, fakeproc.EngineCore,
		fakeproc.Process{PID: 3001, PPID: 1, Comm: "ollama", Start: 5000000, RSSKB: 1 << 20,
			Argv: []string{"/usr/local/bin/ollama", "serve"}, Cgroup: "0::/system.slice/ollama.service\n"})
	fakeproc.Listen(t, tree, server.PID, atoi(t, vllm.Port()))
	fakeproc.Listen(t, tree, 3001, atoi(t, ollama.Port()))

	dir, err := os.MkdirTemp("", "docker")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	socket := filepath.Join(dir, "docker.sock")
	l, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	docker := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`[{"Id":"` + id + `","Names":["/vllm-1"],"Image":"vllm/vllm-openai:latest","Labels":{"com.docker.compose.service":"vllm"}}]`))
	})}
	go docker.Serve(l)
	t.Cleanup(func() { docker.Close() })

	p := testexporter.Start(t, nil, "--path.procfs="+tree, noGPU,
		"--workloads.docker-socket="+socket, "--engines.target=ollama="+ollama.Address(), "--web.disable-exporter-metrics")
	var metrics string
	testexporter.Eventually(t, 30*time.Second, func() bool {
		metrics = p.Get(t, "/metrics")
		return strings.Contains(metrics, `spark_engine_up{address="`+ollama.Address()+`",kind="ollama"`) && strings.Contains(metrics, `spark_engine_up{address="`+vllm.Address()+`",kind="vllm"`)
	}, "both engines asked")
	for _, series := range []string{
		`spark_workload_info{container="8dfafdbc3a40",kind="vllm",pid="2101",pod_uid="",role="inference"} 1`,
		`spark_workload_container_info{compose_service="vllm",container="8dfafdbc3a40",image="vllm/vllm-openai:latest",name="vllm-1"} 1`,
		`spark_workload_field_supported{field="docker"} 1`,
		`spark_engine_up{address="` + vllm.Address() + `",kind="vllm",pid="2101"} 1`,
		`spark_engine_kv_cache_usage_ratio{address="` + vllm.Address() + `",kind="vllm",pid="2101"} 0.97`,
		`spark_engine_requests{address="` + vllm.Address() + `",kind="vllm",pid="2101",state="running"} 6`,
		`spark_engine_requests{address="` + vllm.Address() + `",kind="vllm",pid="2101",state="waiting"} 11`,
		`spark_engine_preemptions_total{address="` + vllm.Address() + `",kind="vllm",pid="2101"} 23`,
		`spark_engine_tokens_total{address="` + vllm.Address() + `",kind="vllm",pid="2101",tokens="prompt"} 123456`,
		`spark_engine_tokens_total{address="` + vllm.Address() + `",kind="vllm",pid="2101",tokens="generation"} 65432`,
		`spark_engine_up{address="` + ollama.Address() + `",kind="ollama",pid="3001"} 1`,
		`spark_engine_model_bytes{address="` + ollama.Address() + `",kind="ollama",model="llama3.1:70b",pid="3001"} 4.2e+10`,
		`spark_engine_model_unload_seconds{address="` + ollama.Address() + `",kind="ollama",model="llama3.1:70b",pid="3001"} `,
	} {
		if !strings.Contains(metrics, series) {
			t.Errorf("/metrics lacks %s", series)
		}
	}
	// The two collectors' output, the figures fixed: the golden file
	// that rules and dashboards are checked against (the time left of
	// the keep-alive depends on the clock).
	filtered := p.Get(t, "/metrics?collect[]=workloads&collect[]=engines")
	filtered = strings.NewReplacer(vllm.Address(), "127.0.0.1:<vllm>", ollama.Address(), "127.0.0.1:<ollama>").Replace(filtered)
	golden(t, "engines.metrics", sortSamples(unloadLine.ReplaceAllString(normalise(filtered), "$1 <seconds>")))
	if strings.Contains(metrics, "sk-test") || strings.Contains(metrics, "FixtureCmdlineSecret") {
		t.Error("/metrics carries the command line's key")
	}

	// The status page's model: the container's name, the KV cache, and
	// the model Ollama holds with when it unloads.
	var st struct {
		Workloads struct {
			List []struct {
				PID           int    `json:"pid"`
				Container     string `json:"container"`
				ContainerName string `json:"container_name"`
				Engine        *struct {
					Up     bool     `json:"up"`
					KV     *float64 `json:"kv_cache_usage_ratio"`
					Models []struct {
						Name      string `json:"name"`
						UnloadsAt string `json:"unloads_at"`
					} `json:"models"`
				} `json:"engine"`
			} `json:"list"`
		} `json:"workloads"`
	}
	if err := json.Unmarshal([]byte(p.Get(t, "/api/v1/status")), &st); err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, w := range st.Workloads.List {
		switch {
		case w.PID == 2101 && w.ContainerName == "vllm-1" && w.Engine != nil && w.Engine.Up && w.Engine.KV != nil && *w.Engine.KV == 0.97:
			seen++
		case w.PID == 3001 && w.Container == "" && w.Engine != nil && len(w.Engine.Models) == 1 &&
			w.Engine.Models[0].Name == "llama3.1:70b" && w.Engine.Models[0].UnloadsAt != "":
			seen++
		}
	}
	if seen != 2 {
		t.Errorf("the status model's workloads: %+v; want the vLLM named vllm-1 with its KV cache, and Ollama's model", st.Workloads.List)
	}
	page := p.Get(t, "/")
	for _, want := range []string{"vllm-1", "KV cache 97 %", "llama3.1:70b", "unloads in"} {
		if !strings.Contains(page, want) {
			t.Errorf("the status page lacks %q", want)
		}
	}

	var groups []sdGroup
	if err := json.Unmarshal([]byte(p.Get(t, sdPath)), &groups); err != nil {
		t.Fatal(err)
	}
	byKind := map[string]sdGroup{}
	for _, g := range groups {
		byKind[g.Labels["kind"]] = g
	}
	if g := byKind["vllm"]; len(groups) != 2 || len(g.Targets) != 1 || g.Targets[0] != vllm.Address() ||
		g.Labels["pid"] != "2101" || g.Labels["container"] != "8dfafdbc3a40" {
		t.Errorf("/sd/engines: %+v, want the vLLM at %s in its container, and the Ollama", groups, vllm.Address())
	}
	if g := byKind["ollama"]; len(g.Targets) != 1 || g.Targets[0] != ollama.Address() || g.Labels["pid"] != "3001" {
		t.Errorf("/sd/engines' Ollama: %+v", g)
	}
}

// sortSamples sorts each run of sample lines: the exposition orders them
// by the address label, which holds the fakes' ephemeral ports.
func sortSamples(metrics string) string {
	lines := strings.Split(strings.TrimSuffix(metrics, "\n"), "\n")
	start := 0
	for i := 0; i <= len(lines); i++ {
		if i == len(lines) || strings.HasPrefix(lines[i], "#") {
			slices.Sort(lines[start:i])
			start = i + 1
		}
	}
	return strings.Join(lines, "\n") + "\n"
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
