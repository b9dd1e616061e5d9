// Package engine is the inference engines' own account of themselves, as
// plain values: where each is asked (Target, Resolve), what it answered
// (Reading), and Ollama's /api/ps parser. No prompt, request or user text
// is read: the one label taken from an engine is Ollama's model name,
// checked (ModelLabel).
package engine

import (
	"time"
)

// Kinds of engine asked, as the workloads collector names them.
const (
	KindVLLM     = "vllm"
	KindSGLang   = "sglang"
	KindLlamaCpp = "llama_cpp"
	KindOllama   = "ollama"
)

// Kinds lists every kind asked.
var Kinds = []string{KindVLLM, KindSGLang, KindLlamaCpp, KindOllama}

// Target is one engine to ask.
type Target struct {
	// PID is the engine's process (spark_workload_info's pid); 0 for a
	// --engines.target no process was found for.
	PID  int
	Kind string
	// Address is host:port on loopback; "" for an engine found that holds
	// no listener at the port its command line names.
	Address string
	// Listens are where loopback reaches the listeners the engine's
	// process holds (engines found only).
	Listens []string
	// UID is the user of the engine's listener; -1 when not known.
	UID int
	// Named: an --engines.target, an address the operator named.
	Named bool
	// Container is the short ID of the engine's container, "" on the host.
	Container string
}

// TakesKey tells whether the key of --engines.bearer-token-file goes to t:
// only to an address the operator named, and never to Ollama, whose
// server has no key.
func (t Target) TakesKey() bool { return t.Named && t.Kind != KindOllama }

// Path is the endpoint asked: Ollama's list of loaded models, the others'
// Prometheus metrics.
func (t Target) Path() string {
	if t.Kind == KindOllama {
		return "/api/ps"
	}
	return "/metrics"
}

// Reading is one engine's answer. A nil figure was not in the answer.
type Reading struct {
	Target
	// Up: the engine answered, and the answer could be read.
	Up bool
	// Problem says why not, without quoting the answer.
	Problem string
	// At is when the engine was asked.
	At time.Time

	KVCacheUsage *float64
	Running      *float64
	Waiting      *float64
	Preemptions  *float64
	PromptTokens *float64
	GenTokens    *float64
	// Models are Ollama's loaded models.
	Models []Model
	// ModelsLeftOut counts models whose name is no label, or past the cap.
	ModelsLeftOut int
}

// Model is one model Ollama holds.
type Model struct {
	Name string
	// Bytes is its size in memory (/api/ps `size`).
	Bytes float64
	// ExpiresAt is when its keep-alive ends and Ollama unloads it.
	ExpiresAt time.Time
}

// UnloadSeconds is how long the model stays loaded idle; 0 once due.
func (m Model) UnloadSeconds(now time.Time) float64 {
	return max(0, m.ExpiresAt.Sub(now).Seconds())
}
