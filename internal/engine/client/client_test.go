package client

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/engine"
	"github.com/spark-exporter/spark_exporter/internal/testing/fakeengine"
)

var now = time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)

func ask(t *testing.T, kind, address string) engine.Reading {
	t.Helper()
	return NewAsker("").Ask(context.Background(), engine.Target{PID: 42, Kind: kind, Address: address}, now)
}

func val(p *float64) string {
	if p == nil {
		return "absent"
	}
	return fmt.Sprint(*p)
}

func TestAskEachEngine(t *testing.T) {
	f := fakeengine.Figures{KVCache: 0.42, Running: 3, Waiting: 5, Preemptions: 7, PromptTokens: 1100, GenTokens: 2200, Model: "Qwen/Qwen3-32B"}
	for _, tc := range []struct {
		kind        string
		preemptions string
	}{
		{engine.KindVLLM, "7"}, {engine.KindSGLang, "7"},
		// llama.cpp's server preempts nothing: no such counter.
		{engine.KindLlamaCpp, "absent"},
	} {
		e := fakeengine.Start(t, tc.kind, f)
		r := ask(t, tc.kind, e.Address())
		if !r.Up {
			t.Fatalf("%s: not up: %s", tc.kind, r.Problem)
		}
		got := []string{val(r.KVCacheUsage), val(r.Running), val(r.Waiting), val(r.Preemptions), val(r.PromptTokens), val(r.GenTokens)}
		want := []string{"0.42", "3", "5", tc.preemptions, "1100", "2200"}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s: kv, running, waiting, preemptions, prompt, generation = %v, want %v", tc.kind, got, want)
		}
	}
}

func TestOlderVLLMCacheName(t *testing.T) {
	body := []byte("# TYPE vllm:gpu_cache_usage_perc gauge\nvllm:gpu_cache_usage_perc{model_name=\"m\"} 0.25\n")
	var r engine.Reading
	if err := parseMetrics(engine.KindVLLM, bytes.NewReader(body), &r); err != nil || val(r.KVCacheUsage) != "0.25" {
		t.Errorf("V0's gpu_cache_usage_perc: %v, %s", err, val(r.KVCacheUsage))
	}
}

// llama-server's text pasted through a web page: each line ends "\r\n".
func TestCRLFLines(t *testing.T) {
	body := strings.ReplaceAll(fakeengine.Metrics(engine.KindLlamaCpp, fakeengine.Figures{KVCache: 0.5, Running: 2}), "\n", "\r\n")
	var r engine.Reading
	if err := parseMetrics(engine.KindLlamaCpp, strings.NewReader(body), &r); err != nil || val(r.KVCacheUsage) != "0.5" || val(r.Running) != "2" {
		t.Errorf("a CRLF answer: %v, kv %s, running %s", err, val(r.KVCacheUsage), val(r.Running))
	}
}

func TestSumsAndMaxOverEngineCores(t *testing.T) {
	body := []byte(`vllm:kv_cache_usage_perc{engine="0"} 0.2
vllm:kv_cache_usage_perc{engine="1"} 0.7
vllm:num_requests_running{engine="0"} 2
vllm:num_requests_running{engine="1"} 3
`)
	var r engine.Reading
	if err := parseMetrics(engine.KindVLLM, bytes.NewReader(body), &r); err != nil {
		t.Fatal(err)
	}
	if val(r.KVCacheUsage) != "0.7" || val(r.Running) != "5" {
		t.Errorf("kv %s (want the largest, 0.7), running %s (want the sum, 5)", val(r.KVCacheUsage), val(r.Running))
	}
}

func TestAskOllama(t *testing.T) {
	e := fakeengine.Start(t, engine.KindOllama, fakeengine.Figures{Model: "llama3.1:70b", ModelBytes: 42e9, ExpiresAt: now.Add(4 * time.Minute)})
	r := ask(t, engine.KindOllama, e.Address())
	if !r.Up || len(r.Models) != 1 {
		t.Fatalf("up %v, %d models (%s)", r.Up, len(r.Models), r.Problem)
	}
	m := r.Models[0]
	if m.Name != "llama3.1:70b" || m.Bytes != 42e9 || m.UnloadSeconds(now) != 240 {
		t.Errorf("model %+v, unload in %v s, want llama3.1:70b, 42e9 bytes, 240 s", m, m.UnloadSeconds(now))
	}
	if m.UnloadSeconds(now.Add(time.Hour)) != 0 {
		t.Error("a keep-alive past is not 0 seconds left")
	}
}

func TestBearerToken(t *testing.T) {
	e := fakeengine.Start(t, engine.KindVLLM, fakeengine.Figures{Model: "m"})
	e.RequireToken("s3cret")
	if r := ask(t, engine.KindVLLM, e.Address()); r.Up || r.Problem != problemNeedsKey {
		t.Errorf("without the key: up %v, problem %q", r.Up, r.Problem)
	}
	named := engine.Target{Kind: engine.KindVLLM, Address: e.Address(), Named: true}
	if r := NewAsker("s3cret\n").Ask(context.Background(), named, now); !r.Up {
		t.Errorf("with the key: %s", r.Problem)
	}
	// An engine found, not named: the key is not sent.
	found := engine.Target{PID: 42, Kind: engine.KindVLLM, Address: e.Address()}
	if r := NewAsker("s3cret").Ask(context.Background(), found, now); r.Up || r.Problem != problemNeedsKey {
		t.Errorf("an engine found was sent the key: up %v, problem %q", r.Up, r.Problem)
	}
}

// hostile serves handler as an engine would.
func hostile(t *testing.T, handler http.HandlerFunc) string {
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func TestHostileEngines(t *testing.T) {
	other := hostile(t, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "vllm:num_requests_running 1\n") })
	for _, tc := range []struct {
		name    string
		kind    string
		handler http.HandlerFunc
		problem string
	}{
		{"a 100 MB answer", engine.KindVLLM, func(w http.ResponseWriter, r *http.Request) {
			line := []byte(strings.Repeat("# padding padding padding padding\n", 1<<10))
			for written := 0; written < 100<<20; written += len(line) {
				if _, err := w.Write(line); err != nil {
					return
				}
			}
		}, "larger than 4 MiB"},
		{"100,000 series", engine.KindVLLM, func(w http.ResponseWriter, r *http.Request) {
			for i := range 100_000 {
				fmt.Fprintf(w, "vllm:num_requests_running{i=\"%d\"} 1\n", i)
			}
		}, errTooManySeries.Error()},
		{"a redirect to another host", engine.KindVLLM, func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "http://"+other+"/metrics", http.StatusFound)
		}, problemRedirect},
		{"malformed text", engine.KindVLLM, func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, "vllm:num_requests_running{model_name=\"m} 1\n")
		}, "malformed metrics text"},
		{"a ratio above 1", engine.KindVLLM, func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, "vllm:kv_cache_usage_perc 7\n")
		}, ""},
		{"not Ollama's JSON", engine.KindOllama, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "<html>") }, "not Ollama's JSON"},
		{"a 500", engine.KindSGLang, func(w http.ResponseWriter, r *http.Request) { http.Error(w, "x", 500) }, "answered 500"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ask(t, tc.kind, hostile(t, tc.handler))
			if tc.problem == "" {
				if !r.Up || r.KVCacheUsage != nil {
					t.Errorf("up %v, kv %s: want up, with the impossible figure absent", r.Up, val(r.KVCacheUsage))
				}
				return
			}
			if r.Up || !strings.Contains(r.Problem, tc.problem) {
				t.Errorf("up %v, problem %q, want %q", r.Up, r.Problem, tc.problem)
			}
		})
	}
}

// A trickle: the engine sends a byte at a time and never finishes; the
// deadline ends the question. The handler is released by the test, not by
// time.
func TestTrickleIsCut(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	address := hostile(t, func(w http.ResponseWriter, r *http.Request) {
		fl := w.(http.Flusher)
		for {
			if _, err := w.Write([]byte("#")); err != nil {
				return
			}
			fl.Flush()
			select {
			case <-release:
				return
			case <-r.Context().Done():
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	})
	a := NewAsker("")
	a.Timeout = 200 * time.Millisecond
	r := a.Ask(context.Background(), engine.Target{Kind: engine.KindVLLM, Address: address}, now)
	if r.Up || !strings.Contains(r.Problem, "deadline") {
		t.Errorf("up %v, problem %q: want the deadline", r.Up, r.Problem)
	}
}

func TestCheckAddress(t *testing.T) {
	for address, ok := range map[string]bool{
		"127.0.0.1:8000": true, "localhost:11434": true, "[::1]:30000": true,
		"10.0.0.2:8000": false, "example.com:80": false, "127.0.0.1:0": false, "127.0.0.1": false, "127.0.0.1:http": false,
	} {
		if err := CheckAddress(address); (err == nil) != ok {
			t.Errorf("%s: err %v, want ok=%v", address, err, ok)
		}
	}
	// An address that passed no check is still refused where it is dialled.
	r := NewAsker("").Ask(context.Background(), engine.Target{Kind: engine.KindVLLM, Address: "192.0.2.1:80"}, now)
	if r.Up || !strings.Contains(r.Problem, "loopback") {
		t.Errorf("a non-loopback address: up %v, problem %q", r.Up, r.Problem)
	}
}

func FuzzParseMetrics(f *testing.F) {
	f.Add("vllm", []byte(fakeengine.Metrics("vllm", fakeengine.Figures{Model: "m", KVCache: 0.5})))
	f.Add("sglang", []byte(fakeengine.Metrics("sglang", fakeengine.Figures{Model: "m"})))
	f.Add("llama_cpp", []byte(fakeengine.Metrics("llama_cpp", fakeengine.Figures{})))
	f.Add("vllm", []byte("vllm:kv_cache_usage_perc{a=\"\\\"\"} NaN\n# TYPE vllm:kv_cache_usage_perc counter\n"))
	f.Add("llama_cpp", []byte("# TYPE llamacpp:kv_cache_usage_ratio gauge\r\nllamacpp:kv_cache_usage_ratio 0.5\r\n\r"))
	f.Fuzz(func(t *testing.T, kind string, body []byte) {
		var r engine.Reading
		if parseMetrics(kind, bytes.NewReader(body), &r) != nil {
			return
		}
		if r.KVCacheUsage != nil && (*r.KVCacheUsage < 0 || *r.KVCacheUsage > 1) {
			t.Errorf("kv cache ratio %v", *r.KVCacheUsage)
		}
	})
}
