package collector

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/container/dockerapi"
	"github.com/spark-exporter/spark_exporter/internal/engine"
	"github.com/spark-exporter/spark_exporter/internal/engine/client"
	"github.com/spark-exporter/spark_exporter/internal/hostfs"
	"github.com/spark-exporter/spark_exporter/internal/testing/fakeengine"
	"github.com/spark-exporter/spark_exporter/internal/testing/fakeproc"
)

const dockerID = "8dfafdbc3a40f1a5b7d2d4a8bb7c3f9b0e1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e"

// A fake vLLM in a Docker container (systemd driver) on its own --port,
// and a fake Ollama on the host at a port given by --engines.target, as
// workloads found in /proc: one round shows each engine's figures.
func TestEnginesFoundAsWorkloads(t *testing.T) {
	vllm := fakeengine.Start(t, "vllm", fakeengine.Figures{KVCache: 0.93, Running: 4, Waiting: 9, Preemptions: 17,
		PromptTokens: 5e5, GenTokens: 2e5, Model: "Qwen/Qwen3-32B-AWQ"})
	expires := time.Now().Add(5 * time.Minute)
	ollama := fakeengine.Start(t, "ollama", fakeengine.Figures{Model: "llama3.1:70b", ModelBytes: 42e9, ExpiresAt: expires})

	server := fakeproc.VLLMServer
	server.Argv = append(server.Argv, "--port", vllm.Port())
	server.Cgroup = "0::/system.slice/docker-" + dockerID + ".scope\n"
	ollamaServe := fakeproc.Process{PID: 3001, PPID: 1, Comm: "ollama", Start: 5000000, RSSKB: 1 << 20,
		Argv: []string{"/usr/local/bin/ollama", "serve"}, Cgroup: "0::/system.slice/ollama.service\n"}
	tree := fakeproc.WriteTree(t, fakeproc.Init, fakeproc.LoginBash, server, fakeproc.EngineCore, ollamaServe)
	fakeproc.Listen(t, tree, server.PID, port(t, vllm.Address()))
	fakeproc.Listen(t, tree, ollamaServe.PID, port(t, ollama.Address()))

	docker := fakeDockerSocket(t)
	found := engine.NewDirectory()
	w := newWorkloadsCollector(hostfs.New(tree), nil, nopLogger())
	w.places.found = found
	w.places.docker = dockerapi.NewDocker(docker)
	defer w.Close()
	got, err := collect(t, w)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]float64{
		`spark_workload_info{container="8dfafdbc3a40",kind="vllm",pid="2101",pod_uid="",role="inference"}`:                             1,
		`spark_workload_info{container="",kind="ollama",pid="3001",pod_uid="",role="inference"}`:                                       1,
		`spark_workload_container_info{compose_service="vllm",container="8dfafdbc3a40",image="vllm/vllm-openai:latest",name="vllm-1"}`: 1,
		`spark_workload_field_supported{field="docker"}`:                                                                               1,
	} {
		if v, ok := got[name]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", name, v, ok, want)
		}
	}

	e := newEnginesCollector(found, []engine.Static{{Kind: "ollama", Address: ollama.Address()}}, client.NewAsker(""), nopLogger())
	defer e.Close()
	if got := e.Targets(); len(got) != 2 || got[0].PID != 3001 || got[0].Address != ollama.Address() || got[1].Container != "8dfafdbc3a40" {
		t.Fatalf("targets %+v: want the Ollama at --engines.target, joined to its process, then the vLLM in its container", got)
	}
	e.round()
	got, err = collect(t, e)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]float64{
		`spark_engine_up{address="` + vllm.Address() + `",kind="vllm",pid="2101"}`:                                   1,
		`spark_engine_kv_cache_usage_ratio{address="` + vllm.Address() + `",kind="vllm",pid="2101"}`:                 0.93,
		`spark_engine_requests{address="` + vllm.Address() + `",kind="vllm",pid="2101",state="running"}`:             4,
		`spark_engine_requests{address="` + vllm.Address() + `",kind="vllm",pid="2101",state="waiting"}`:             9,
		`spark_engine_preemptions_total{address="` + vllm.Address() + `",kind="vllm",pid="2101"}`:                    17,
		`spark_engine_tokens_total{address="` + vllm.Address() + `",kind="vllm",pid="2101",tokens="prompt"}`:         5e5,
		`spark_engine_tokens_total{address="` + vllm.Address() + `",kind="vllm",pid="2101",tokens="generation"}`:     2e5,
		`spark_engine_up{address="` + ollama.Address() + `",kind="ollama",pid="3001"}`:                               1,
		`spark_engine_model_bytes{address="` + ollama.Address() + `",kind="ollama",model="llama3.1:70b",pid="3001"}`: 42e9,
	} {
		if v, ok := got[name]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", name, v, ok, want)
		}
	}
	unload := got[`spark_engine_model_unload_seconds{address="`+ollama.Address()+`",kind="ollama",model="llama3.1:70b",pid="3001"}`]
	if left := time.Until(expires).Seconds(); unload <= 0 || unload < left-1 || unload > 300 {
		t.Errorf("unload in %v s, want about %v (at most 300)", unload, left)
	}
	if len(got) != 10 {
		t.Errorf("%d series, want 10: %v", len(got), got)
	}
}

// A Docker socket that refuses, and one that is absent: the field is 0,
// the collector succeeds.
func TestWorkloadsDockerAbsent(t *testing.T) {
	tree := fakeproc.WriteTree(t, fakeproc.Init, fakeproc.VLLMServer)
	w := newWorkloadsCollector(hostfs.New(tree), nil, nopLogger())
	w.places.docker = dockerapi.NewDocker(filepath.Join(t.TempDir(), "docker.sock"))
	defer w.Close()
	got, err := collect(t, w)
	if err != nil {
		t.Fatalf("an absent Docker failed the collector: %v", err)
	}
	if v, ok := got[`spark_workload_field_supported{field="docker"}`]; !ok || v != 0 {
		t.Errorf(`field_supported{field="docker"} = %v (present %v), want 0`, v, ok)
	}
	// No cgroup file in the tree: the workload is labelled as on the host.
	if _, ok := got[`spark_workload_info{container="",kind="vllm",pid="2101",pod_uid="",role="inference"}`]; !ok {
		t.Errorf("no unlabelled workload: %v", got)
	}
}

// An engine that does not answer is up 0, and the scrape goes on.
func TestEngineDown(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	address := l.Addr().String()
	l.Close() // nothing listens there now
	e := newEnginesCollector(engine.NewDirectory(), []engine.Static{{Kind: "vllm", Address: address}}, client.NewAsker(""), nopLogger())
	defer e.Close()
	e.round()
	got, err := collect(t, e)
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := got[`spark_engine_up{address="`+address+`",kind="vllm",pid=""}`]; !ok || v != 0 || len(got) != 1 {
		t.Errorf("got %v: want only spark_engine_up 0", got)
	}
}

// port is address's port.
func port(t *testing.T, address string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(address)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Engines whose command lines name a port: asked only where the process
// holds a listener of its own, never where another process listens, nor
// at the exporter's own port.
func TestEnginesAskedOnlyAtTheirListeners(t *testing.T) {
	claims := func(pid, port int) fakeproc.Process {
		p := fakeproc.VLLMServer
		p.PID, p.Argv = pid, append(slices.Clone(p.Argv), "--port", strconv.Itoa(port))
		return p
	}
	// 2101 holds 8001; 2102 claims 8001 and holds nothing; 2103 claims
	// 9100, the exporter's, and holds it as 2101 would; 2104 claims
	// 8002 and holds 8003.
	tree := fakeproc.WriteTree(t, fakeproc.Init, claims(2101, 8001), claims(2102, 8001), claims(2103, 9100), claims(2104, 8002))
	fakeproc.Listen(t, tree, 2101, 8001)
	fakeproc.Listen(t, tree, 2103, 9100)
	fakeproc.Listen(t, tree, 2104, 8003)
	found := engine.NewDirectory()
	w := newWorkloadsCollector(hostfs.New(tree), nil, nopLogger())
	w.places.found = found
	defer w.Close()
	if _, err := collect(t, w); err != nil {
		t.Fatal(err)
	}
	e := newEnginesCollector(found, nil, client.NewAsker(""), nopLogger())
	defer e.Close()
	e.own = []int{9100}
	got := e.Targets()
	if len(got) != 1 || got[0].PID != 2101 || got[0].Address != "127.0.0.1:8001" {
		t.Errorf("targets %+v: want only 2101 at 127.0.0.1:8001", got)
	}
}

func TestParseEngineTarget(t *testing.T) {
	for s, ok := range map[string]bool{
		"vllm=127.0.0.1:8000": true, "ollama=localhost:11434": true,
		"tgi=127.0.0.1:3000": false, "vllm=10.1.2.3:8000": false, "127.0.0.1:8000": false,
	} {
		if _, err := parseEngineTarget(s); (err == nil) != ok {
			t.Errorf("%q: err %v, want ok=%v", s, err, ok)
		}
	}
}

// fakeDockerSocket serves GET /containers/json as the Docker Engine API
// documents it, with the vLLM's container.
func fakeDockerSocket(t *testing.T) string {
	t.Helper()
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
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`[{"Id":"` + dockerID + `","Names":["/vllm-1"],"Image":"vllm/vllm-openai:latest",` +
			`"Labels":{"com.docker.compose.service":"vllm"}}]`))
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return socket
}

// An engine's descriptors are read when it is found, and again only when
// the loopback listeners change: a listener it opens late (a vLLM listens
// once its model is loaded) is in the very next scan, one it closes is
// gone from it, and another process's listener is never its own.
func TestEngineSocketsReadAgainOnlyWhenListenersChange(t *testing.T) {
	server := fakeproc.VLLMServer
	server.Argv = append(slices.Clone(server.Argv), "--port", "8001")
	other := fakeproc.LoginBash
	tree := fakeproc.WriteTree(t, fakeproc.Init, other, server, fakeproc.EngineCore)
	stdin := filepath.Join(tree, strconv.Itoa(server.PID), "fd", "0")
	if err := os.MkdirAll(filepath.Dir(stdin), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/dev/null", stdin); err != nil {
		t.Fatal(err)
	}
	found := engine.NewDirectory()
	w := newWorkloadsCollector(hostfs.New(tree), nil, nopLogger())
	w.places.found = found
	defer w.Close()
	scan := func(want string, walks int) {
		t.Helper()
		if _, err := collect(t, w); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, target := range found.Targets() {
			got = append(got, fmt.Sprintf("%d@%s%v", target.PID, target.Address, target.Listens))
		}
		if fmt.Sprint(got) != want || w.places.sockets.walks != walks {
			t.Errorf("targets %v after %d reads of the descriptors, want %s after %d", got, w.places.sockets.walks, want, walks)
		}
	}
	scan("[]", 1) // loading its model: no listener yet
	scan("[]", 1)
	fakeproc.Listen(t, tree, server.PID, 8001)
	scan("[2101@127.0.0.1:8001[127.0.0.1:8001]]", 2)
	scan("[2101@127.0.0.1:8001[127.0.0.1:8001]]", 2)
	fakeproc.Listen(t, tree, other.PID, 8002)
	scan("[2101@127.0.0.1:8001[127.0.0.1:8001]]", 3)
	fakeproc.Listen(t, tree, server.PID, 8003)
	scan("[2101@127.0.0.1:8001[127.0.0.1:8001 127.0.0.1:8003]]", 4)
	fakeproc.Unlisten(t, tree, server.PID, 8001)
	scan("[2101@[127.0.0.1:8003]]", 5)
	scan("[2101@[127.0.0.1:8003]]", 5)
	fakeproc.Unlisten(t, tree, other.PID, 8002)
	fakeproc.Listen(t, tree, other.PID, 8001) // its port, another's socket
	scan("[2101@[127.0.0.1:8003]]", 6)
	if len(w.places.sockets.byPID) != 1 {
		t.Errorf("%d engines' sockets remembered, want 1", len(w.places.sockets.byPID))
	}
	// It exits, its engine core and its listener with it.
	fakeproc.Unlisten(t, tree, server.PID, 8003)
	for _, pid := range []int{server.PID, fakeproc.EngineCore.PID} {
		if err := os.RemoveAll(filepath.Join(tree, strconv.Itoa(pid))); err != nil {
			t.Fatal(err)
		}
	}
	scan("[]", 6)
	if len(w.places.sockets.byPID) != 0 {
		t.Errorf("%d engines' sockets remembered after the engine exited, want none", len(w.places.sockets.byPID))
	}
}
