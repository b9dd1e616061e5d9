package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"time"
	"unicode/utf8"

	"github.com/spark-exporter/spark_exporter/internal/safetext"
)

// maxModels: Ollama keeps OLLAMA_MAX_LOADED_MODELS loaded (3 per GPU by default).
const maxModels = 32

// maxListed: past it the answer is no Ollama's, and is refused as it is read.
const maxListed = 1000

// maxModelName: Ollama's names (registry/namespace/model:tag) are far shorter.
const maxModelName = 200

var (
	errNotPS     = errors.New("the answer of /api/ps is not Ollama's JSON")
	errTooManyPS = fmt.Errorf("the answer of /api/ps lists more than %d models", maxListed)
)

type psModel struct {
	Name      string    `json:"name"`
	Model     string    `json:"model"`
	Size      float64   `json:"size"`
	ExpiresAt time.Time `json:"expires_at"`
}

// ParseOllamaPS reads Ollama's GET /api/ps answer into r; a model whose name is
// not a modelLabel, or past maxModels, is left out and counted.
func ParseOllamaPS(body io.Reader, r *Reading) error {
	dec := json.NewDecoder(body)
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return errNotPS
	}
	r.Models = nil
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return errNotPS
		}
		if key != "models" {
			if dec.Decode(new(json.RawMessage)) != nil {
				return errNotPS
			}
			continue
		}
		if err := readModels(dec, r); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil {
		return errNotPS
	}
	return nil
}

func readModels(dec *json.Decoder, r *Reading) error {
	tok, err := dec.Token()
	if err != nil || (tok != json.Delim('[') && tok != nil) {
		return errNotPS
	}
	if tok == nil {
		return nil // "models": null
	}
	for listed := 0; dec.More(); listed++ {
		if listed == maxListed {
			return errTooManyPS
		}
		var m psModel
		if err := dec.Decode(&m); err != nil {
			return errNotPS
		}
		name := m.Name
		if name == "" {
			name = m.Model
		}
		if len(r.Models) == maxModels || !modelLabel(name) || m.Size < 0 || math.IsInf(m.Size, 0) {
			r.ModelsLeftOut++
			continue
		}
		r.Models = append(r.Models, Model{Name: name, Bytes: m.Size, ExpiresAt: m.ExpiresAt})
	}
	if _, err := dec.Token(); err != nil {
		return errNotPS
	}
	return nil
}

// modelLabel tells whether name may be a label value as it is: a name cut or changed would name another model.
func modelLabel(name string) bool {
	return name != "" && len(name) <= maxModelName && utf8.ValidString(name) && safetext.Index(name) < 0
}

const modelNamesWindow = time.Hour

// ModelNames are the names one engine showed, with when each was last
// answered, so that new names at each question make at most maxModels a
// modelNamesWindow, not a new set of series each time.
type ModelNames map[string]time.Time

// Keep leaves out of r the models past the bound, counted in r.ModelsLeftOut.
func (n ModelNames) Keep(r *Reading, now time.Time) {
	maps.DeleteFunc(n, func(_ string, last time.Time) bool { return now.Sub(last) > modelNamesWindow })
	kept := r.Models[:0]
	for _, m := range r.Models {
		if _, ok := n[m.Name]; !ok && len(n) >= maxModels {
			r.ModelsLeftOut++
			continue
		}
		n[m.Name] = now
		kept = append(kept, m)
	}
	r.Models = kept
}
