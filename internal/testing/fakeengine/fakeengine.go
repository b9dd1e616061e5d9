// Package fakeengine serves, on 127.0.0.1, what inference engines answer:
// /metrics text in vLLM's, SGLang's and llama.cpp's server's format, and
// Ollama's GET /api/ps JSON, each shaped after the engine's documentation
// (the sources are named beside each sample). Tests change the figures
// with Set; no engine runs here.
package fakeengine

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Figures are what a fake engine reports.
type Figures struct {
	KVCache, Running, Waiting, Preemptions, PromptTokens, GenTokens float64
	// Model is the model's name (vLLM's model_name label, Ollama's name).
	Model string
	// ModelBytes and ExpiresAt are Ollama's size and expires_at.
	ModelBytes float64
	ExpiresAt  time.Time
	// PreemptionsPerAnswer is added to Preemptions after each answer: an
	// engine preempting at the pace it is asked.
	PreemptionsPerAnswer float64
	// GenTokensPerAnswer and PromptTokensPerAnswer grow the token
	// counters the same way: an engine serving.
	GenTokensPerAnswer, PromptTokensPerAnswer float64
}

// Engine is a fake engine's server.
type Engine struct {
	*httptest.Server
	kind string
	mu   sync.Mutex
	f    Figures
	// Token, when set, is the bearer token the engine asks for.
	token string
	// asked and keyed count the questions, and those with a key.
	asked, keyed atomic.Int64
}

// Start serves a fake engine of kind (vllm, sglang, llama_cpp, ollama) on
// 127.0.0.1; it stops at the end of the test.
func Start(t testing.TB, kind string, f Figures) *Engine {
	t.Helper()
	e := &Engine{kind: kind, f: f}
	e.Server = httptest.NewServer(http.HandlerFunc(e.serve))
	t.Cleanup(e.Close)
	return e
}

// RequireToken makes the engine answer 401 without this bearer token, as
// llama.cpp's server does with --api-key (its /metrics included).
func (e *Engine) RequireToken(token string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.token = token
}

// Set changes the figures served from now on.
func (e *Engine) Set(f Figures) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.f = f
}

// Address is the engine's host:port.
func (e *Engine) Address() string { return strings.TrimPrefix(e.URL, "http://") }

// Port is the engine's port.
func (e *Engine) Port() string {
	_, port, _ := strings.Cut(e.Address(), ":")
	return port
}

// Asked is how many questions the engine had.
func (e *Engine) Asked() int64 { return e.asked.Load() }

// Keyed is how many questions carried an Authorization header.
func (e *Engine) Keyed() int64 { return e.keyed.Load() }

func (e *Engine) serve(w http.ResponseWriter, r *http.Request) {
	e.asked.Add(1)
	if r.Header.Get("Authorization") != "" {
		e.keyed.Add(1)
	}
	e.mu.Lock()
	f, token := e.f, e.token
	e.f.Preemptions += e.f.PreemptionsPerAnswer
	e.f.GenTokens += e.f.GenTokensPerAnswer
	e.f.PromptTokens += e.f.PromptTokensPerAnswer
	e.mu.Unlock()
	if token != "" && r.Header.Get("Authorization") != "Bearer "+token {
		http.Error(w, `{"error":"Unauthorized"}`, http.StatusUnauthorized)
		return
	}
	switch {
	case e.kind == "ollama" && r.URL.Path == "/api/ps":
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		fmt.Fprint(w, OllamaPS(f))
	case e.kind != "ollama" && r.URL.Path == "/metrics":
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		fmt.Fprint(w, Metrics(e.kind, f))
	default:
		http.NotFound(w, r)
	}
}

// Metrics is the /metrics text of an engine of kind with figures f.
func Metrics(kind string, f Figures) string {
	switch kind {
	case "vllm":
		return fmt.Sprintf(vllmMetrics, f.Model, f.Running, f.Model, f.Waiting, f.Model, f.KVCache,
			f.Model, f.Preemptions, f.Model, f.PromptTokens, f.Model, f.GenTokens)
	case "sglang":
		return fmt.Sprintf(sglangMetrics, f.Model, f.PromptTokens, f.Model, f.GenTokens, f.Model, f.KVCache,
			f.Model, f.Running, f.Model, f.Waiting, f.Model, f.Preemptions)
	case "llama_cpp":
		return fmt.Sprintf(llamaCppMetrics, f.PromptTokens, f.GenTokens, f.KVCache, f.Running, f.Waiting)
	}
	panic("fakeengine: no metrics for kind " + kind)
}

// vllmMetrics follows vLLM V1's /metrics as its docs show it
// (docs.vllm.ai, "Production Metrics", and docs/design/metrics.md: the
// prometheus_client exposition, counters as NAME_total with NAME_created,
// labels model_name and engine), trimmed to the families read plus one
// histogram that is not.
const vllmMetrics = `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="%s"} %g
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="%s"} %g
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="%s"} %g
# HELP vllm:num_preemptions_total Cumulative number of preemption from the engine.
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{engine="0",model_name="%s"} %g
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="%s"} %g
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="%s"} %g
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.001",model_name="m"} 0.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 3.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 3.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 0.4
`

// sglangMetrics follows SGLang's docs/references/production_metrics.md
// (the example of `curl http://localhost:30000/metrics`), with the
// retraction counter sglang:num_retracted_requests_total.
const sglangMetrics = `# HELP sglang:prompt_tokens_total Number of prefill tokens processed.
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{model_name="%s"} %g
# HELP sglang:generation_tokens_total Number of generation tokens processed.
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{model_name="%s"} %g
# HELP sglang:token_usage The token usage
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="%s"} %g
# HELP sglang:cache_hit_rate The cache hit rate
# TYPE sglang:cache_hit_rate gauge
sglang:cache_hit_rate{model_name="m"} 0.007507552643049313
# HELP sglang:num_running_reqs The number of running requests
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="%s"} %g
# HELP sglang:num_queue_reqs The number of requests in the waiting queue
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="%s"} %g
# HELP sglang:num_retracted_requests_total Number of retracted requests.
# TYPE sglang:num_retracted_requests_total counter
sglang:num_retracted_requests_total{model_name="%s"} %g
`

// llamaCppMetrics follows llama.cpp's tools/server/README.md, "GET
// /metrics: Prometheus compatible metrics exporter" (with --metrics), as a
// build that still serves kv_cache_usage_ratio answers.
const llamaCppMetrics = `# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total %g
# HELP llamacpp:prompt_seconds_total Prompt process time
# TYPE llamacpp:prompt_seconds_total counter
llamacpp:prompt_seconds_total 235.743
# HELP llamacpp:tokens_predicted_total Number of generation tokens processed.
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total %g
# HELP llamacpp:kv_cache_usage_ratio KV-cache usage. 1 means 100 percent usage.
# TYPE llamacpp:kv_cache_usage_ratio gauge
llamacpp:kv_cache_usage_ratio %g
# HELP llamacpp:requests_processing Number of requests processing.
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing %g
# HELP llamacpp:requests_deferred Number of requests deferred.
# TYPE llamacpp:requests_deferred gauge
llamacpp:requests_deferred %g
`

// OllamaPS is Ollama's GET /api/ps answer, as its docs/api.md ("List
// Running Models") shows it, for one model.
func OllamaPS(f Figures) string {
	return fmt.Sprintf(`{"models":[{"name":%q,"model":%q,"size":%.0f,"digest":"2ae6f6dd7a3dd734790bbbf58b8909a606e0e7e97e94b7604e0aa7ae4490e6d8",`+
		`"details":{"parent_model":"","format":"gguf","family":"llama","families":["llama"],"parameter_size":"8.0B","quantization_level":"Q4_0"},`+
		`"expires_at":%q,"size_vram":%.0f}]}`,
		f.Model, f.Model, f.ModelBytes, f.ExpiresAt.Format(time.RFC3339Nano), f.ModelBytes)
}

// StartDocker serves GET /containers/json on a Unix socket, as the Docker
// Engine API documents it ("List containers"), listing one container of the
// given full ID, name, image and Compose service; it returns the socket's
// path, and stops at the end of the test.
func StartDocker(t testing.TB, id, name, image, service string) string {
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
	answer := fmt.Sprintf(`[{"Id":%q,"Names":[%q],"Image":%q,"State":"running","Labels":{"com.docker.compose.service":%q}}]`,
		id, "/"+name, image, service)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/containers/json" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, answer)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return socket
}
