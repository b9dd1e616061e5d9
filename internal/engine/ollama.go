package engine

import (
	"encoding/json"
	"errors"
	"math"
	"time"
	"unicode/utf8"

	"github.com/spark-exporter/spark_exporter/internal/safetext"
)

// MaxModels bounds the models kept of one Ollama answer: Ollama keeps
// OLLAMA_MAX_LOADED_MODELS loaded (3 per GPU by default, docs/faq.md).
const MaxModels = 32

// MaxModelName bounds a model's name as a label: Ollama's names
// (registry/namespace/model:tag) are far shorter.
const MaxModelName = 200

// ParseOllamaPS reads Ollama's GET /api/ps answer (docs/api.md, "List
// Running Models") into r. A model whose name is not a ModelLabel, or past
// MaxModels, is left out and counted.
func ParseOllamaPS(body []byte, r *Reading) error {
	var ps struct {
		Models []struct {
			Name      string    `json:"name"`
			Model     string    `json:"model"`
			Size      float64   `json:"size"`
			ExpiresAt time.Time `json:"expires_at"`
		} `json:"models"`
	}
	if err := json.Unmarshal(body, &ps); err != nil {
		return errors.New("the answer of /api/ps is not Ollama's JSON")
	}
	r.Models = nil
	for _, m := range ps.Models {
		name := m.Name
		if name == "" {
			name = m.Model
		}
		if len(r.Models) == MaxModels || !ModelLabel(name) || m.Size < 0 || math.IsInf(m.Size, 0) {
			r.ModelsLeftOut++
			continue
		}
		r.Models = append(r.Models, Model{Name: name, Bytes: m.Size, ExpiresAt: m.ExpiresAt})
	}
	return nil
}

// ModelLabel tells whether name may be the model label's value as it is:
// non-empty, at most MaxModelName bytes of UTF-8, no control or format
// character. A name cut or changed would name another model.
func ModelLabel(name string) bool {
	return name != "" && len(name) <= MaxModelName && utf8.ValidString(name) && safetext.Index(name) < 0
}
