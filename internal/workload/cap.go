package workload

import (
	"strconv"
	"strings"
)

// CapSource says where a cap comes from.
type CapSource string

const (
	// CapFlag: the command line sets the cap.
	CapFlag CapSource = "flag"
	// CapDefault: the program caps itself and the command line does not
	// change it.
	CapDefault CapSource = "default"
)

// Cap is the share of the GPU's memory (on the Spark, of the whole pool) a
// program was started to take. Source is empty when no cap is known: the
// program has none (Ollama, llama.cpp, trainers), or Problem says why it
// could not be read.
type Cap struct {
	Ratio  float64
	Source CapSource
	// Problem explains, without quoting the command line, why a program
	// that has a cap has no readable one.
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

// capRules: the flag that caps each kind, and the program's default.
//
// vLLM: --gpu-memory-utilization, default 0.9 (vllm/config/cache.py,
// `gpu_memory_utilization: float = Field(default=0.9, gt=0, le=1)`). vLLM's
// parser also takes the underscore spelling; so does `trl vllm-serve`,
// whose default is 0.9 as well (trl/scripts/vllm_serve.py).
//
// SGLang: --mem-fraction-static. Its server-arguments documentation
// (docs.sglang.io, advanced_features/server_arguments.md, "Common launch
// commands") says "The default value is 0.9". The argument table there
// lists None, meaning that recent releases derive the fraction at start
// from the GPU's memory and parallelism; 0.9 is the documented figure.
var capRules = map[string]capRule{
	KindVLLM:   {flags: []string{"--gpu-memory-utilization", "--gpu_memory_utilization"}, def: 0.9},
	KindSGLang: {flags: []string{"--mem-fraction-static", "--mem_fraction_static"}, def: 0.9},
}

// capOf reads the cap of a program of the given kind from its arguments:
// `--flag X` or `--flag=X`, the last one winning as with argparse. Kinds
// without a cap rule have no cap.
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

// parseRatio accepts a share in (0, 1], as vLLM does: 0 takes nothing and
// would be refused by the program itself.
func parseRatio(s string) (float64, bool) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || !(f > 0 && f <= 1) {
		return 0, false
	}
	return f, true
}
