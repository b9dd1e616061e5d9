package workload

import (
	"strconv"
	"strings"
)

// Endpoint is where an inference server serves its own metrics, as its
// command line sets it: a port on the host, and whether the server was
// told to serve metrics at all. The command line is read for these two
// facts and dropped.
type Endpoint struct {
	// Port is 0 for a kind that serves no metrics the exporter reads.
	Port int
	// FromFlag: the command line set the port; otherwise it is the
	// program's default, and the server may listen elsewhere (Ollama's
	// OLLAMA_HOST, a config file): --engines.target then overrides it.
	FromFlag bool
	// Metrics: the server serves them. vLLM and Ollama always do; SGLang
	// only with --enable-metrics, llama.cpp's server only with --metrics.
	Metrics bool
}

type endpointRule struct {
	defaultPort int
	// metricsFlag is the flag that turns metrics on; "" when always on.
	metricsFlag string
}

// endpointRules: each engine's port flag is --port, with its default:
//
//   - vLLM: 8000 (vllm/entrypoints/openai/cli_args.py, `port: int = 8000`);
//     /metrics always served.
//   - SGLang: 30000 (sglang/srt/server_args.py, `port: int = 30000`);
//     /metrics with --enable-metrics (docs: references/production_metrics.md).
//   - llama.cpp's llama-server: 8080 (tools/server/README.md, `--port PORT
//     port to listen (default: 8080)`); /metrics with --metrics.
//   - Ollama: 11434, set by OLLAMA_HOST, which is not read (environments
//     hold keys); its account is GET /api/ps (docs/api.md, "List Running
//     Models").
var endpointRules = map[string]endpointRule{
	KindVLLM:     {defaultPort: 8000},
	KindSGLang:   {defaultPort: 30000, metricsFlag: "--enable-metrics"},
	KindLlamaCpp: {defaultPort: 8080, metricsFlag: "--metrics"},
	KindOllama:   {defaultPort: 11434},
}

// EndpointOf reads the endpoint of a program of the given kind from its
// command line (/proc/PID/cmdline, NUL-separated): `--port N` or
// `--port=N`, the last one winning as with argparse. A kind that is no
// engine, or a port that is not a number in 1–65535, gives the zero
// Endpoint (for a bad port: not asked, rather than asked at a guess).
func EndpointOf(kind string, cmdline []byte) Endpoint {
	rule, ok := endpointRules[kind]
	if !ok {
		return Endpoint{}
	}
	e := Endpoint{Port: rule.defaultPort, Metrics: rule.metricsFlag == ""}
	argv := splitCmdline(cmdline)
	for i := 0; i < len(argv); i++ {
		a := argv[i]
		if a == "--" {
			break
		}
		if rule.metricsFlag != "" && a == rule.metricsFlag {
			e.Metrics = true
		}
		value, found := "", false
		if a == "--port" {
			found = true
			if i+1 < len(argv) {
				i++
				value = argv[i]
			}
		} else if v, ok := strings.CutPrefix(a, "--port="); ok {
			found, value = true, v
		}
		if !found {
			continue
		}
		port, err := strconv.Atoi(value)
		if err != nil || port < 1 || port > 65535 {
			return Endpoint{}
		}
		e.Port, e.FromFlag = port, true
	}
	return e
}
