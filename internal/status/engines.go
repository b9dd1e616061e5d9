package status

import (
	"fmt"
	"strings"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/collected"
	"github.com/spark-exporter/spark_exporter/internal/engine"
)

// Place is where a workload runs and what its engine says of itself.
type Place struct {
	// Container is the short ID of its container, "" on the host.
	Container string `json:"container"`
	// ContainerName is the Docker Engine's name for it, "" where not
	// known (--workloads.docker-socket not given or not answering).
	ContainerName string `json:"container_name"`
	// Engine is the engine's own account; nil when it is not an engine
	// the engines collector asks, or that collector is off.
	Engine *Engine `json:"engine"`
}

// Engine is one inference engine's latest answer.
type Engine struct {
	Up bool `json:"up"`
	// KVCacheUsageRatio is nil when the engine does not serve it.
	KVCacheUsageRatio *float64      `json:"kv_cache_usage_ratio"`
	Models            []EngineModel `json:"models"`
}

// EngineModel is a model Ollama holds and when it unloads it.
type EngineModel struct {
	Name  string `json:"name"`
	Bytes int64  `json:"bytes"`
	// UnloadsAt is when its keep-alive ends, RFC 3339.
	UnloadsAt string `json:"unloads_at"`
}

// placeWorkloads adds each workload's container and engine.
func placeWorkloads(w *Workloads, cs *collected.Containers, engines []engine.Reading) {
	byPID := map[int]engine.Reading{}
	for _, r := range engines {
		if r.PID != 0 {
			byPID[r.PID] = r
		}
	}
	for i := range w.List {
		x := &w.List[i]
		if cs != nil {
			ref := cs.ByPID[x.PID]
			x.Container = ref.ID
			x.ContainerName = cs.Names[ref.ID].Name
		}
		r, ok := byPID[x.PID]
		if !ok {
			continue
		}
		e := &Engine{Up: r.Up, KVCacheUsageRatio: r.KVCacheUsage, Models: []EngineModel{}}
		for _, m := range r.Models {
			e.Models = append(e.Models, EngineModel{Name: m.Name, Bytes: size(uint64(m.Bytes)), UnloadsAt: m.ExpiresAt.UTC().Format(time.RFC3339)})
		}
		x.Engine = e
	}
}

// containerCell is a workload's container as the table shows it.
func containerCell(x Workload) string {
	switch {
	case x.ContainerName != "":
		return x.ContainerName
	case x.Container != "":
		return x.Container
	}
	return "host"
}

// engineCell is an engine's account as the table shows it: its KV cache,
// or the models Ollama holds and when each unloads.
func engineCell(x Workload, now time.Time) string {
	e := x.Engine
	switch {
	case e == nil:
		return ""
	case !e.Up:
		return "not answering"
	}
	var parts []string
	if e.KVCacheUsageRatio != nil {
		parts = append(parts, "KV cache "+Percent(*e.KVCacheUsageRatio))
	}
	for _, m := range e.Models {
		text := m.Name + " " + Bytes(m.Bytes)
		if at, err := time.Parse(time.RFC3339, m.UnloadsAt); err == nil {
			if left := at.Sub(now); left > 0 {
				text += fmt.Sprintf(", unloads in %s", left.Round(time.Second))
			} else {
				text += ", unloading"
			}
		}
		parts = append(parts, text)
	}
	if len(parts) == 0 {
		return "answering"
	}
	return strings.Join(parts, "; ")
}

// generatedAt is when the model was made, for times shown relative to it.
func generatedAt(m Model) time.Time {
	at, err := time.Parse(time.RFC3339, m.GeneratedAt)
	if err != nil {
		return time.Now()
	}
	return at
}
