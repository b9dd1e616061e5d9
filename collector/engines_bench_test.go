package collector

import (
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/engine"
	"github.com/spark-exporter/spark_exporter/internal/engine/client"
	"github.com/spark-exporter/spark_exporter/internal/hostfs"
	"github.com/spark-exporter/spark_exporter/internal/testing/cputime"
	"github.com/spark-exporter/spark_exporter/internal/testing/fakeengine"
	"github.com/spark-exporter/spark_exporter/internal/workload"
)

// twoEngines is a vLLM and an Ollama answering on loopback, as the engines
// collector would find them.
func twoEngines(b *testing.B) []engine.Static {
	vllm := fakeengine.Start(b, "vllm", fakeengine.Figures{KVCache: 0.5, Running: 4, Waiting: 2, Preemptions: 7,
		PromptTokens: 1e6, GenTokens: 5e5, Model: "Qwen/Qwen3-32B-AWQ"})
	ollama := fakeengine.Start(b, "ollama", fakeengine.Figures{Model: "llama3.1:70b", ModelBytes: 42e9, ExpiresAt: time.Now().Add(time.Hour)})
	return []engine.Static{{Kind: "vllm", Address: vllm.Address()}, {Kind: "ollama", Address: ollama.Address()}}
}

// BenchmarkEnginesRound is the background work one scrape starts: asking
// two engines and reading their answers.
func BenchmarkEnginesRound(b *testing.B) {
	c := newEnginesCollector(engine.NewDirectory(), twoEngines(b), client.NewAsker(""), nopLogger())
	defer c.Close()
	b.ReportAllocs()
	for b.Loop() {
		c.round()
	}
	if r := c.readings; len(r) != 2 || !r[0].Up || !r[1].Up {
		b.Fatalf("readings %+v", r)
	}
}

// BenchmarkEnginesUpdate is what the scrape itself pays: rendering the
// latest round of two engines (the round runs beside it, not in it).
func BenchmarkEnginesUpdate(b *testing.B) {
	c := newEnginesCollector(engine.NewDirectory(), twoEngines(b), client.NewAsker(""), nopLogger())
	defer c.Close()
	c.round()
	// No background asker (start is not called), and a round is always
	// due: Update starts none.
	c.kick <- struct{}{}
	b.ReportAllocs()
	drain(b, c)
}

// BenchmarkWorkloadPlaces is what the workloads collector adds to a scan:
// each workload's cgroup, and each engine's command line for its port, on
// the Spark fixture (a vLLM and a trainer).
func BenchmarkWorkloadPlaces(b *testing.B) {
	w := newWorkloadsCollector(hostfs.New(fixtures), nil, nopLogger())
	defer w.Close()
	w.places.found = engine.NewDirectory()
	res, err := w.scanner.Scan(b.Context())
	if err != nil || len(res.Workloads) == 0 {
		b.Fatalf("%d workloads, %v", len(res.Workloads), err)
	}
	b.ReportAllocs()
	for b.Loop() {
		w.places.place(b.Context(), &res)
	}
}

// BenchmarkEngineSockets is what finding an engine's listener costs a
// scan, on this machine's /proc and kernel: a child process stands for a
// vLLM holding 200 descriptors, one of them a loopback listener at the
// port its command line names. remembered is a scan in which the host's
// listeners are those of the last; read is the first scan of an engine,
// or one after a listener came or went, as every scan was before its
// sockets were remembered.
func BenchmarkEngineSockets(b *testing.B) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	socket, err := l.(*net.TCPListener).File()
	if err != nil {
		b.Fatal(err)
	}
	defer socket.Close()
	files := []*os.File{socket}
	for range 199 {
		f, err := os.Open(os.DevNull)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		files = append(files, f)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	// The test binary itself, running TestEngineStandIn, with the port in
	// argv[0]: the test flags take every other argument.
	child := exec.Command(os.Args[0], "-test.run=^TestEngineStandIn$")
	child.Args[0] = "--port=" + port
	child.Env = append(os.Environ(), engineStandIn+"=1")
	child.ExtraFiles = files
	stdin, err := child.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := child.Start(); err != nil {
		b.Fatal(err)
	}
	defer child.Wait()
	defer stdin.Close()
	engines := []workload.Workload{{PID: child.Process.Pid, Identity: workload.Identity{Role: workload.Inference, Kind: workload.KindVLLM}}}
	proc := hostfs.New("/proc")
	for _, bc := range []struct {
		name   string
		forget bool
	}{{"remembered", false}, {"read", true}} {
		b.Run(bc.name, func(b *testing.B) {
			var s engineSockets
			cputime.Loop(b, func() {
				if bc.forget {
					clear(s.byPID)
				}
				if got := s.targets(proc, engines, nil); len(got) != 1 || got[0].Address != "127.0.0.1:"+port {
					b.Fatalf("targets %+v", got)
				}
			})
			b.ReportMetric(float64(s.walks)/float64(b.N), "reads/op")
		})
	}
}

const engineStandIn = "SPARK_ENGINE_STAND_IN"

// TestEngineStandIn is BenchmarkEngineSockets's engine: it holds the
// descriptors it was given until its standard input closes.
func TestEngineStandIn(t *testing.T) {
	if os.Getenv(engineStandIn) == "" {
		t.Skip("BenchmarkEngineSockets's child process")
	}
	io.Copy(io.Discard, os.Stdin)
}
