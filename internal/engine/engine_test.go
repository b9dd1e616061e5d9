package engine

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/testing/fakeengine"
)

var now = time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)

// hostile serves handler as an engine would.
// A trickle: the engine sends a byte at a time and never finishes; the
// deadline ends the question. The handler is released by the test, not by
// time.
func TestModelLabels(t *testing.T) {
	long := strings.Repeat("m", 10<<10)
	body := fmt.Sprintf(`{"models":[{"name":%q,"size":1},{"name":"evil\u001b[2Jmodel","size":1},{"name":"rtl\u202emodel","size":1},{"name":"ok:1b","size":5}]}`, long)
	var r Reading
	if err := ParseOllamaPS([]byte(body), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Models) != 1 || r.Models[0].Name != "ok:1b" || r.ModelsLeftOut != 3 {
		t.Errorf("models %+v, left out %d: want only ok:1b kept, 3 left out", r.Models, r.ModelsLeftOut)
	}
	var many strings.Builder
	many.WriteString(`{"models":[`)
	for i := range MaxModels + 5 {
		if i > 0 {
			many.WriteString(",")
		}
		fmt.Fprintf(&many, `{"name":"m%d","size":1}`, i)
	}
	many.WriteString("]}")
	r = Reading{}
	if err := ParseOllamaPS([]byte(many.String()), &r); err != nil || len(r.Models) != MaxModels || r.ModelsLeftOut != 5 {
		t.Errorf("%d models kept, %d left out (%v): want %d and 5", len(r.Models), r.ModelsLeftOut, err, MaxModels)
	}
}

func FuzzParseOllamaPS(f *testing.F) {
	f.Add([]byte(fakeengine.OllamaPS(fakeengine.Figures{Model: "llama3:8b", ModelBytes: 5e9, ExpiresAt: now})))
	f.Fuzz(func(t *testing.T, body []byte) {
		var r Reading
		if ParseOllamaPS(body, &r) != nil {
			return
		}
		if len(r.Models) > MaxModels {
			t.Errorf("%d models", len(r.Models))
		}
		for _, m := range r.Models {
			if !ModelLabel(m.Name) {
				t.Errorf("model name %q kept", m.Name)
			}
		}
	})
}

func TestResolve(t *testing.T) {
	found := []Target{
		{PID: 10, Kind: KindVLLM, Address: "127.0.0.1:8001"},
		{PID: 20, Kind: KindOllama, Address: "127.0.0.1:11434", DefaultPort: true},
	}
	got := Resolve(found, []Static{
		{Kind: KindOllama, Address: "127.0.0.1:9999"},   // the one Ollama at its default: overridden
		{Kind: KindVLLM, Address: "[::1]:8001"},         // the vLLM at that port: its host changed
		{Kind: KindLlamaCpp, Address: "127.0.0.1:8080"}, // none found: added, no process
	})
	want := []Target{
		{Kind: KindLlamaCpp, Address: "127.0.0.1:8080"},
		{PID: 10, Kind: KindVLLM, Address: "[::1]:8001"},
		{PID: 20, Kind: KindOllama, Address: "127.0.0.1:9999"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	if found[1].Address != "127.0.0.1:11434" {
		t.Error("Resolve changed the targets it was given")
	}
	many := make([]Target, 3*MaxTargets)
	if n := len(Resolve(many, nil)); n != MaxTargets {
		t.Errorf("%d targets, cap %d", n, MaxTargets)
	}
}
