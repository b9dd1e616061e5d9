// Package engine is the inference engines' own account of themselves, as plain
// values. No prompt, request or user text is read: the one label taken from an
// engine is Ollama's model name, checked (modelLabel).
package engine

import (
	"time"
)

const (
	KindVLLM     = "vllm"
	KindSGLang   = "sglang"
	KindLlamaCpp = "llama_cpp"
	KindOllama   = "ollama"
)

var Kinds = []string{KindVLLM, KindSGLang, KindLlamaCpp, KindOllama}

type Target struct {
	PID  int // 0 for an --engines.target no process was found for
	Kind string
	// Address is host:port on loopback; "" for an engine found with no
	// listener at the port its command line names.
	Address   string
	Listens   []string // loopback addresses of the process's listeners (engines found only)
	UID       int      // of the listener; -1 when not known
	Named     bool     // an --engines.target
	Container string   // short ID, "" on the host
}

// TakesKey: the bearer token goes only to an address the operator named, never to Ollama, which has no key.
func (t Target) TakesKey() bool { return t.Named && t.Kind != KindOllama }

func (t Target) Path() string {
	if t.Kind == KindOllama {
		return "/api/ps"
	}
	return "/metrics"
}

// Reading is one engine's answer. A nil figure was not in the answer.
type Reading struct {
	Target
	Up      bool
	Problem string // why not Up, without quoting the answer
	At      time.Time

	KVCacheUsage  *float64
	Running       *float64
	Waiting       *float64
	Preemptions   *float64
	PromptTokens  *float64
	GenTokens     *float64
	Models        []Model
	ModelsLeftOut int // names that are no label, or past the cap
}

// Model is one model Ollama holds.
type Model struct {
	Name      string
	Bytes     float64 // in memory (/api/ps `size`)
	ExpiresAt time.Time
}

func (m Model) UnloadSeconds(now time.Time) float64 {
	return max(0, m.ExpiresAt.Sub(now).Seconds())
}
