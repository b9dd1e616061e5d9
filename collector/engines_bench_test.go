package collector

import (
	"testing"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/engine"
	"github.com/spark-exporter/spark_exporter/internal/engine/client"
	"github.com/spark-exporter/spark_exporter/internal/hostfs"
	"github.com/spark-exporter/spark_exporter/internal/testing/fakeengine"
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
