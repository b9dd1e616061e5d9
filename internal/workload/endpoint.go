package workload

import (
	"strconv"
	"strings"
)

// Endpoint is where an inference server serves its own metrics, as its
// command line sets it; the command line is dropped once read.
type Endpoint struct {
	// Port is 0 for a kind that serves no metrics the exporter reads.
	Port int
	// FromFlag is whether the command line set the port; a default may be
	// wrong (OLLAMA_HOST, a config file), which --engines.target overrides.
	FromFlag bool
	// Metrics is whether the server was told to serve metrics.
	Metrics bool
}

type endpointRule struct {
	defaultPort int
	metricsFlag string
}

// endpointRules: each engine's --port default and metrics flag.
//
//   - vLLM: 8000 (vllm/entrypoints/openai/cli_args.py); /metrics always.
//   - SGLang: 30000 (sglang/srt/server_args.py); /metrics with --enable-metrics.
//   - llama-server: 8080 (tools/server/README.md); /metrics with --metrics.
//   - Ollama: 11434, moved by OLLAMA_HOST, which is not read (environments
//     hold keys); its account is GET /api/ps (docs/api.md).
var endpointRules = map[string]endpointRule{
	KindVLLM:     {defaultPort: 8000},
	KindSGLang:   {defaultPort: 30000, metricsFlag: "--enable-metrics"},
	KindLlamaCpp: {defaultPort: 8080, metricsFlag: "--metrics"},
	KindOllama:   {defaultPort: 11434},
}

// EndpointOf reads `--port N` or `--port=N` from a command line
// (/proc/PID/cmdline), the last one winning as with argparse. A kind that is
// no engine, or a bad port, gives the zero Endpoint: not asked, rather than
// asked at a guess.
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
