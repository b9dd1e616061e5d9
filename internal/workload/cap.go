package workload

import (
	"strconv"
	"strings"
)

// CapSource says where a cap comes from.
type CapSource string

const (
	// CapFlag means the command line sets the cap.
	CapFlag CapSource = "flag"
	// CapDefault means the program's own default.
	CapDefault CapSource = "default"
)

// Cap is the share of the GPU's memory (on the Spark, of the whole pool) a
// program was started to take. Source is empty when the program has none
// (Ollama, llama.cpp, trainers) or Problem says why it is unreadable.
type Cap struct {
	Ratio  float64
	Source CapSource
	// Problem says why a program that has a cap has no readable one.
	Problem string
}

// Problems with a cap. They never quote the value: a garbled cap may be a
// secret pasted in the wrong place.
const (
	ProblemCapNotANumber       = "memory cap flag is not a number in (0, 1]"
	ProblemCapInConfigFile     = "memory cap may be set in a --config file, which is not read"
	ProblemCapNotOnCommandLine = "memory cap is on the parent's command line, and the parent was not recognised"
)

type capRule struct {
	flags []string
	def   float64
}

// capRules: the flag that caps each kind, and the program's default. vLLM's
// is 0.9 (vllm/config/cache.py), as is `trl vllm-serve`'s
// (trl/scripts/vllm_serve.py); both parsers take the underscore spelling.
// SGLang's "default value is 0.9" (docs.sglang.io,
// advanced_features/server_arguments.md), though recent releases derive it
// at start from the GPU's memory and parallelism.
var capRules = map[string]capRule{
	KindVLLM:   {flags: []string{"--gpu-memory-utilization", "--gpu_memory_utilization"}, def: 0.9},
	KindSGLang: {flags: []string{"--mem-fraction-static", "--mem_fraction_static"}, def: 0.9},
}

// capOf reads `--flag X` or `--flag=X`, the last winning as with argparse.
func capOf(kind string, argv []string) Cap {
	r, ok := capRules[kind]
	if !ok {
		return Cap{}
	}
	value, found, config := "", false, false
	for i := 0; i < len(argv); i++ {
		a := argv[i]
		if a == "--" {
			break
		}
		if a == "--config" || strings.HasPrefix(a, "--config=") {
			config = true
		}
		for _, f := range r.flags {
			if a == f {
				found = true
				value = ""
				if i+1 < len(argv) {
					i++
					value = argv[i]
				}
			} else if v, ok := strings.CutPrefix(a, f+"="); ok {
				found, value = true, v
			}
		}
	}
	switch {
	case found:
		ratio, ok := parseRatio(value)
		if !ok {
			return Cap{Problem: ProblemCapNotANumber}
		}
		return Cap{Ratio: ratio, Source: CapFlag}
	case config:
		return Cap{Problem: ProblemCapInConfigFile}
	default:
		return Cap{Ratio: r.def, Source: CapDefault}
	}
}

// parseRatio accepts a share in (0, 1], as vLLM does.
func parseRatio(s string) (float64, bool) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || !(f > 0 && f <= 1) {
		return 0, false
	}
	return f, true
}
