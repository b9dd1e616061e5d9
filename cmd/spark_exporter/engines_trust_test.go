package main

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/testing/fakeengine"
	"github.com/spark-exporter/spark_exporter/internal/testing/otheruser"
	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
)

// Engines another user of the box runs, on the host's /proc: each is
// tools/fakeengine copied where nobody may run it, as `vllm serve --port N`.

// engineCopy is tools/fakeengine as vllm in a directory nobody may enter.
func engineCopy(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(testexporter.FakeEngine(t))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(otheruser.Dir(t), "vllm")
	if err := os.WriteFile(path, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// startEngine runs the copy as `vllm serve --port PORT`, as nobody unless
// asRoot; env FAKEENGINE_LISTEN=no makes it hold no listener.
func startEngine(t *testing.T, path string, asRoot bool, port int, env ...string) *testexporter.Process {
	t.Helper()
	args := []string{"serve", "--port", strconv.Itoa(port)}
	cmd := exec.Command(path, args...)
	if !asRoot {
		cmd = otheruser.Command(t, path, args...)
	}
	return testexporter.StartCommand(t, cmd, env)
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// The key of --engines.bearer-token-file goes to the --engines.target that
// asks for it, and to no engine another user runs at a listener of its
// own, nor to Ollama, which has no key.
func TestEngineKeyGoesOnlyToNamedTargets(t *testing.T) {
	otheruser.Require(t)
	const key = "sk-engine-0123456789"
	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	named := fakeengine.Start(t, "vllm", fakeengine.Figures{KVCache: 0.25, Model: "m"})
	named.RequireToken(key)
	ollama := fakeengine.Start(t, "ollama", fakeengine.Figures{Model: "llama3:8b", ModelBytes: 5e9, ExpiresAt: time.Now().Add(time.Hour)})
	fakePort := freePort(t)
	fake := startEngine(t, engineCopy(t), false, fakePort)

	p := testexporter.Start(t, nil, noGPU, "--engines.bearer-token-file="+keyFile,
		"--engines.target=vllm="+named.Address(), "--engines.target=ollama="+ollama.Address())
	// An engine is asked before its round ends, and a scrape renders the
	// latest round ended: the answers are awaited in /metrics itself.
	up := []string{
		fmt.Sprintf(`spark_engine_up{address=%q,kind="vllm",pid=""} 1`, named.Address()),
		fmt.Sprintf(`spark_engine_up{address="127.0.0.1:%d",kind="vllm",pid="%d"} 1`, fakePort, fake.PID()),
	}
	testexporter.Eventually(t, 30*time.Second, func() bool {
		metrics := p.Get(t, "/metrics")
		return named.Keyed() > 0 && ollama.Asked() > 0 && strings.Contains(fake.Logs(), "asked /metrics") &&
			strings.Contains(metrics, up[0]) && strings.Contains(metrics, up[1])
	}, "the named vLLM, Ollama and the other user's engine to be asked, and %s served", strings.Join(up, " and "))
	if strings.Contains(fake.Logs(), "key=true") {
		t.Error("the engine another user runs received the key")
	}
	if n := ollama.Keyed(); n > 0 {
		t.Errorf("Ollama received the key %d times", n)
	}
}

// A process another user runs as `vllm serve --port <the exporter's port>`
// (no listener of its own), and an --engines.target at the exporter's own
// address: the exporter answers only the test's scrapes, never its own.
func TestEnginesNeverAskTheExporter(t *testing.T) {
	otheruser.Require(t)
	own := freePort(t)
	named := fakeengine.Start(t, "vllm", fakeengine.Figures{Model: "m"})
	p := testexporter.Start(t, nil, noGPU, fmt.Sprintf("--web.listen-address=127.0.0.1:%d", own),
		fmt.Sprintf("--engines.target=vllm=127.0.0.1:%d", own), "--engines.target=vllm="+named.Address())
	u, err := url.Parse(p.URL)
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(u.Port())
	sleeper := startEngine(t, engineCopy(t), false, port, "FAKEENGINE_LISTEN=no")

	scrapes := 0
	scrape := func() string {
		scrapes++
		return p.Get(t, "/metrics")
	}
	found := fmt.Sprintf(`kind="vllm",pid="%d"`, sleeper.PID())
	testexporter.Eventually(t, 30*time.Second, func() bool { return strings.Contains(scrape(), found) },
		"the other user's process to be found")
	// Two more answers of the named engine: a round began after the scan
	// that found the process.
	asked := named.Asked()
	testexporter.Eventually(t, 30*time.Second, func() bool { scrape(); return named.Asked() >= asked+2 }, "two more rounds")
	served, ok := testexporter.Value(p.Get(t, "/metrics"), `promhttp_metric_handler_requests_total{code="200"}`)
	if !ok || int(served) != scrapes {
		t.Errorf("the exporter answered %v scrapes (present %v), the test made %d: it asked itself", served, ok, scrapes)
	}
	sd := p.Get(t, sdPath)
	for _, self := range []int{own, port} {
		if strings.Contains(sd, fmt.Sprintf(":%d\"", self)) {
			t.Errorf("/sd/engines lists the exporter's own port %d: %s", self, sd)
		}
	}
}

// 16 engines another user started first cannot hide a vLLM started later
// by another user: each user's first engine is asked before any user's
// second.
func TestCrowdOfEnginesHidesNone(t *testing.T) {
	otheruser.Require(t)
	path := engineCopy(t)
	for range 16 {
		startEngine(t, path, false, freePort(t))
	}
	realPort := freePort(t)
	real := startEngine(t, path, true, realPort)
	p := testexporter.Start(t, nil, noGPU)
	listed := fmt.Sprintf(`"127.0.0.1:%d"`, realPort)
	up := fmt.Sprintf(`spark_engine_up{address="127.0.0.1:%d",kind="vllm",pid="%d"} 1`, realPort, real.PID())
	// A scrape scans the processes; /sd/engines lists what the latest
	// scan found.
	testexporter.Eventually(t, 30*time.Second, func() bool {
		metrics := p.Get(t, "/metrics")
		return strings.Contains(metrics, up) && strings.Contains(p.Get(t, sdPath), listed)
	}, "the vLLM started last (pid %d) to be asked and listed at /sd/engines", real.PID())
	if n := strings.Count(p.Get(t, "/metrics"), "\nspark_engine_up{"); n > 16 {
		t.Errorf("%d engines asked, more than 16", n)
	}
}

// hostileAnswer is about 4 MiB of what an engine of kind may answer to
// make the exporter hold it: Ollama's models without names, or vLLM
// samples of a name read with a long label.
func hostileAnswer(kind string) []byte {
	var b bytes.Buffer
	if kind == "ollama" {
		b.WriteString(`{"models":[{"size":1}`)
		for b.Len() < 4<<20-16 {
			b.WriteString(`,{"size":1}`)
		}
		b.WriteString("]}")
		return b.Bytes()
	}
	label := strings.Repeat("x", 4000)
	for i := 0; b.Len() < 4<<20-5000; i++ {
		fmt.Fprintf(&b, "vllm:num_requests_running{i=\"%d\",x=%q} 1\n", i, label)
	}
	return b.Bytes()
}

// 16 engines answering about 4 MiB each, three rounds: the exporter reads
// each answer as it arrives, within its bounds, and stays small.
func TestHostileEnginesKeepMemorySmall(t *testing.T) {
	args := []string{noGPU}
	var asked atomic.Int64
	for i := range 16 {
		kind := []string{"ollama", "vllm"}[i%2]
		body := hostileAnswer(kind)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			asked.Add(1)
			w.Write(body)
		}))
		t.Cleanup(srv.Close)
		args = append(args, "--engines.target="+kind+"="+strings.TrimPrefix(srv.URL, "http://"))
	}
	p := testexporter.Start(t, nil, args...)
	testexporter.Eventually(t, 60*time.Second, func() bool {
		p.Get(t, "/metrics")
		return asked.Load() >= 3*16
	}, "three rounds of the 16 engines")
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.PID()))
	if err != nil {
		t.Fatal(err)
	}
	peak := statusKB(t, status, "VmHWM")
	t.Logf("exporter: VmHWM %d MiB, VmRSS %d MiB", peak>>10, statusKB(t, status, "VmRSS")>>10)
	if peak >= 150<<10 {
		t.Errorf("the exporter's resident memory peaked at %d MiB, want under 150", peak>>10)
	}
	if n := len(engineDown.FindAllString(p.Get(t, "/metrics"), -1)); n != 16 {
		t.Errorf("%d engines at spark_engine_up 0, want the 16 refused", n)
	}
}

func statusKB(t *testing.T, status []byte, field string) int {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + field + `:\s+(\d+) kB$`).FindSubmatch(status)
	if m == nil {
		t.Fatalf("no %s in the exporter's status", field)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

var engineDown = regexp.MustCompile(`(?m)^spark_engine_up\{.*\} 0$`)

var modelLabel = regexp.MustCompile(`(?m)^spark_engine_model_bytes\{[^}]*model="([^"]*)"`)

// An Ollama answering 32 new model names at each question: the exporter
// shows at most 32 names of it over time, not 32 more at each scrape.
func TestOllamaModelNamesDoNotChurn(t *testing.T) {
	var answers atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := answers.Add(1)
		models := make([]string, 32)
		for i := range models {
			models[i] = fmt.Sprintf(`{"name":"m%d-%d","size":1}`, n, i)
		}
		fmt.Fprintf(w, `{"models":[%s]}`, strings.Join(models, ","))
	}))
	t.Cleanup(srv.Close)
	p := testexporter.Start(t, nil, noGPU, "--engines.target=ollama="+strings.TrimPrefix(srv.URL, "http://"))
	names := map[string]bool{}
	testexporter.Eventually(t, 30*time.Second, func() bool {
		for _, m := range modelLabel.FindAllStringSubmatch(p.Get(t, "/metrics"), -1) {
			names[m[1]] = true
		}
		return answers.Load() >= 6
	}, "six answers")
	for _, m := range modelLabel.FindAllStringSubmatch(p.Get(t, "/metrics"), -1) {
		names[m[1]] = true
	}
	if len(names) == 0 || len(names) > 32 {
		t.Errorf("%d model names shown over six answers, want 1 to 32", len(names))
	}
}

// Two vLLMs named by --engines.target are two series; a llama.cpp answer
// with CRLF line ends is read.
func TestTwoEnginesOfOneKind(t *testing.T) {
	a := fakeengine.Start(t, "vllm", fakeengine.Figures{KVCache: 0.25, Model: "a"})
	b := fakeengine.Start(t, "vllm", fakeengine.Figures{KVCache: 0.75, Model: "b"})
	var crlfAsked atomic.Int64
	crlf := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		crlfAsked.Add(1)
		fmt.Fprint(w, strings.ReplaceAll(fakeengine.Metrics("llama_cpp", fakeengine.Figures{KVCache: 0.5, Running: 2}), "\n", "\r\n"))
	}))
	t.Cleanup(crlf.Close)
	c := strings.TrimPrefix(crlf.URL, "http://")
	p := testexporter.Start(t, nil, noGPU, "--engines.target=vllm="+a.Address(), "--engines.target=vllm="+b.Address(),
		"--engines.target=llama_cpp="+c)
	// Rounds follow one another: a second question means the first
	// round's answers are published.
	testexporter.Eventually(t, 30*time.Second, func() bool {
		p.Get(t, "/metrics")
		return a.Asked() >= 2 && b.Asked() >= 2 && crlfAsked.Load() >= 2
	}, "two rounds")
	metrics := p.Get(t, "/metrics")
	for _, want := range []string{
		fmt.Sprintf(`spark_engine_kv_cache_usage_ratio{address=%q,kind="vllm",pid=""} 0.25`, a.Address()),
		fmt.Sprintf(`spark_engine_kv_cache_usage_ratio{address=%q,kind="vllm",pid=""} 0.75`, b.Address()),
		fmt.Sprintf(`spark_engine_kv_cache_usage_ratio{address=%q,kind="llama_cpp",pid=""} 0.5`, c),
		fmt.Sprintf(`spark_engine_requests{address=%q,kind="llama_cpp",pid="",state="running"} 2`, c),
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// The exporter as a user of its own (the .deb's), which may not read
// another user's descriptors: nobody's engine is asked at nobody's
// listener, and a nobody process naming a port root listens at is not.
func TestUnprivilegedExporterAsksOnlyTheUsersListener(t *testing.T) {
	otheruser.Require(t)
	dir := otheruser.Dir(t)
	data, err := os.ReadFile(testexporter.Binary(t))
	if err != nil {
		t.Fatal(err)
	}
	exporter := filepath.Join(dir, "spark_exporter")
	if err := os.WriteFile(exporter, data, 0o755); err != nil {
		t.Fatal(err)
	}
	rootEngine := fakeengine.Start(t, "vllm", fakeengine.Figures{Model: "root"})
	rootPort, _ := strconv.Atoi(rootEngine.Port())
	// The engines' user is neither root nor nobody, whose engines other
	// tests on the host may crowd.
	path := engineCopy(t)
	ownPort := freePort(t)
	own := testexporter.StartCommand(t, asUser(65532, path, "serve", "--port", strconv.Itoa(ownPort)), nil)
	claimer := testexporter.StartCommand(t, asUser(65532, path, "serve", "--port", strconv.Itoa(rootPort)),
		[]string{"FAKEENGINE_LISTEN=no"})
	p := testexporter.StartCommand(t, asUser(65533, exporter, "--web.listen-address=127.0.0.1:0", noGPU), nil)
	up := fmt.Sprintf(`spark_engine_up{address="127.0.0.1:%d",kind="vllm",pid="%d"} 1`, ownPort, own.PID())
	found := fmt.Sprintf(`spark_workload_info{container="",kind="vllm",pid="%d"`, claimer.PID())
	var metrics string
	testexporter.Eventually(t, 30*time.Second, func() bool {
		metrics = p.Get(t, "/metrics")
		return strings.Contains(metrics, up) && strings.Contains(metrics, found)
	}, "nobody's engine to be asked and the claimer found")
	testexporter.Eventually(t, 30*time.Second, func() bool {
		p.Get(t, "/metrics")
		return strings.Count(own.Logs(), "asked /metrics") >= 3
	}, "two more rounds")
	if n := rootEngine.Asked(); n > 0 {
		t.Errorf("root's listener, named by nobody's process, was asked %d times", n)
	}
	if strings.Contains(p.Get(t, sdPath), fmt.Sprintf(`:%d"`, rootPort)) {
		t.Error("/sd/engines lists root's listener")
	}
}

// asUser is name run as uid, with no groups and no inherited capabilities.
func asUser(uid int, name string, args ...string) *exec.Cmd {
	id := strconv.Itoa(uid)
	return exec.Command("setpriv", append([]string{"--reuid=" + id, "--regid=" + id, "--clear-groups", "--inh-caps=-all", "--", name}, args...)...)
}
