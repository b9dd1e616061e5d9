package workload

import (
	"strings"
	"testing"
)

func TestEndpointOf(t *testing.T) {
	cmd := func(args ...string) []byte { return []byte(strings.Join(args, "\x00") + "\x00") }
	for _, tc := range []struct {
		name    string
		kind    string
		cmdline []byte
		want    Endpoint
	}{
		{"vllm default", KindVLLM, cmd("vllm", "serve", "m"), Endpoint{Port: 8000, Metrics: true}},
		{"vllm --port N", KindVLLM, cmd("vllm", "serve", "m", "--port", "8001"), Endpoint{Port: 8001, FromFlag: true, Metrics: true}},
		{"vllm --port=N, last wins", KindVLLM, cmd("vllm", "serve", "--port=1", "m", "--port=8002"), Endpoint{Port: 8002, FromFlag: true, Metrics: true}},
		{"vllm bad port", KindVLLM, cmd("vllm", "serve", "--port", "http"), Endpoint{}},
		{"vllm port out of range", KindVLLM, cmd("vllm", "serve", "--port", "70000"), Endpoint{}},
		{"vllm --port at the end", KindVLLM, cmd("vllm", "serve", "--port"), Endpoint{}},
		{"after --", KindVLLM, cmd("vllm", "serve", "--", "--port", "9"), Endpoint{Port: 8000, Metrics: true}},
		{"sglang without metrics", KindSGLang, cmd("python3", "-m", "sglang.launch_server", "--port", "30001"), Endpoint{Port: 30001, FromFlag: true}},
		{"sglang with metrics", KindSGLang, cmd("python3", "-m", "sglang.launch_server", "--enable-metrics"), Endpoint{Port: 30000, Metrics: true}},
		{"llama-server --metrics", KindLlamaCpp, cmd("llama-server", "-m", "x.gguf", "--metrics", "--port", "8081"), Endpoint{Port: 8081, FromFlag: true, Metrics: true}},
		{"llama-server default", KindLlamaCpp, cmd("llama-server", "-m", "x.gguf"), Endpoint{Port: 8080}},
		{"ollama", KindOllama, cmd("ollama", "serve"), Endpoint{Port: 11434, Metrics: true}},
		{"trainer", KindTRL, cmd("trl", "sft", "--port", "1"), Endpoint{}},
	} {
		if got := EndpointOf(tc.kind, tc.cmdline); got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func FuzzEndpointOf(f *testing.F) {
	f.Add("vllm", []byte("vllm\x00serve\x00--port\x008001\x00"))
	f.Add("sglang", []byte("--port=\x00--enable-metrics"))
	f.Fuzz(func(t *testing.T, kind string, cmdline []byte) {
		e := EndpointOf(kind, cmdline)
		if e.Port < 0 || e.Port > 65535 || (e.Port == 0 && (e.FromFlag || e.Metrics)) {
			t.Errorf("endpoint %+v", e)
		}
	})
}
