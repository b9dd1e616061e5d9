package status

import (
	"fmt"
	"strings"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/collected"
	"github.com/spark-exporter/spark_exporter/internal/engine"
)

type Place struct {
	Container     string  `json:"container"`
	ContainerName string  `json:"container_name"`
	Engine        *Engine `json:"engine"`
}

type Engine struct {
	Up                bool          `json:"up"`
	KVCacheUsageRatio *float64      `json:"kv_cache_usage_ratio"`
	Models            []EngineModel `json:"models"`
}

type EngineModel struct {
	Name      string `json:"name"`
	Bytes     int64  `json:"bytes"`
	UnloadsAt string `json:"unloads_at"`
}

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

func containerCell(x Workload) string {
	switch {
	case x.ContainerName != "":
		return x.ContainerName
	case x.Container != "":
		return x.Container
	}
	return "host"
}

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
		parts = append(parts, "KV cache "+percent(*e.KVCacheUsageRatio))
	}
	for _, m := range e.Models {
		text := m.Name + " " + gib(m.Bytes)
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

func generatedAt(m Model) time.Time {
	at, err := time.Parse(time.RFC3339, m.GeneratedAt)
	if err != nil {
		return time.Now()
	}
	return at
}
