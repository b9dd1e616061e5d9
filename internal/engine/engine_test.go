package engine

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/testing/fakeengine"
)

var now = time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)

func TestModelLabels(t *testing.T) {
	long := strings.Repeat("m", 10<<10)
	body := fmt.Sprintf(`{"models":[{"name":%q,"size":1},{"name":"evil\u001b[2Jmodel","size":1},{"name":"rtl\u202emodel","size":1},{"name":"ok:1b","size":5}]}`, long)
	var r Reading
	if err := ParseOllamaPS(strings.NewReader(body), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Models) != 1 || r.Models[0].Name != "ok:1b" || r.ModelsLeftOut != 3 {
		t.Errorf("models %+v, left out %d: want only ok:1b kept, 3 left out", r.Models, r.ModelsLeftOut)
	}
	var many strings.Builder
	many.WriteString(`{"models":[`)
	for i := range maxModels + 5 {
		if i > 0 {
			many.WriteString(",")
		}
		fmt.Fprintf(&many, `{"name":"m%d","size":1}`, i)
	}
	many.WriteString("]}")
	r = Reading{}
	if err := ParseOllamaPS(strings.NewReader(many.String()), &r); err != nil || len(r.Models) != maxModels || r.ModelsLeftOut != 5 {
		t.Errorf("%d models kept, %d left out (%v): want %d and 5", len(r.Models), r.ModelsLeftOut, err, maxModels)
	}
}

func FuzzParseOllamaPS(f *testing.F) {
	f.Add([]byte(fakeengine.OllamaPS(fakeengine.Figures{Model: "llama3:8b", ModelBytes: 5e9, ExpiresAt: now})))
	f.Add([]byte(`{"x":[1,{"models":2}],"models":null}`))
	f.Add([]byte(`{"models":[{"name":"a","size":1},{"size":"x"}]}`))
	f.Add([]byte(`{"models":[{"name":"a"}]}trailing`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var r Reading
		if ParseOllamaPS(bytes.NewReader(body), &r) != nil {
			return
		}
		if len(r.Models) > maxModels {
			t.Errorf("%d models", len(r.Models))
		}
		for _, m := range r.Models {
			if !modelLabel(m.Name) {
				t.Errorf("model name %q kept", m.Name)
			}
		}
	})
}

// A static target joins the process of its kind that holds a listener at
// its port; the engines found follow, each user's first before any user's
// second; an address is asked once, never at the exporter's own port.
func TestResolve(t *testing.T) {
	found := []Target{
		{PID: 10, Kind: KindVLLM, Address: "127.0.0.1:8001", Listens: []string{"127.0.0.1:8001"}, UID: 1000},
		{PID: 20, Kind: KindOllama, Listens: []string{"127.0.0.1:9999"}, UID: 1000},
		{PID: 30, Kind: KindVLLM, Address: "127.0.0.1:9100", Listens: []string{"127.0.0.1:9100"}, UID: 1000},
	}
	got := Resolve(found, []Static{
		{Kind: KindOllama, Address: "127.0.0.1:9999"},   // Ollama holds it, its command line did not say
		{Kind: KindLlamaCpp, Address: "127.0.0.1:8080"}, // none found: no process
		{Kind: KindVLLM, Address: "127.0.0.1:9100"},     // the exporter's own port
	}, []int{9100})
	want := []Target{
		{PID: 20, Kind: KindOllama, Address: "127.0.0.1:9999", Listens: []string{"127.0.0.1:9999"}, UID: 1000, Named: true},
		{Kind: KindLlamaCpp, Address: "127.0.0.1:8080", UID: -1, Named: true},
		{PID: 10, Kind: KindVLLM, Address: "127.0.0.1:8001", Listens: []string{"127.0.0.1:8001"}, UID: 1000},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	if found[1].Address != "" {
		t.Error("Resolve changed the targets it was given")
	}
}

// 3×maxTargets engines of one user found first, then one of another
// user's: the cap keeps the other user's, and the first user's lowest
// PIDs, at every call.
func TestResolveIsFair(t *testing.T) {
	var found []Target
	for i := range 3 * maxTargets {
		found = append(found, Target{PID: 100 + i, Kind: KindVLLM, Address: fmt.Sprintf("127.0.0.1:%d", 20000+i), UID: 65534})
	}
	found = append(found, Target{PID: 9000, Kind: KindVLLM, Address: "127.0.0.1:8000", UID: 0})
	got := Resolve(found, nil, nil)
	if len(got) != maxTargets {
		t.Fatalf("%d targets, cap %d", len(got), maxTargets)
	}
	if got[0].PID != 100 || got[1].PID != 9000 || got[maxTargets-1].PID != 100+maxTargets-2 {
		t.Errorf("kept %+v: want PID 100, then 9000, then the first user's next lowest", got)
	}
}

// An engine answering new names at each question shows at most
// maxModels names in a window, the first it showed.
func TestModelNamesBounded(t *testing.T) {
	names := ModelNames{}
	for round := range 5 {
		var r Reading
		for i := range maxModels {
			r.Models = append(r.Models, Model{Name: fmt.Sprintf("m%d-%d", round, i)})
		}
		names.Keep(&r, now.Add(time.Duration(round)*time.Minute))
		if want := map[bool]int{true: maxModels, false: 0}[round == 0]; len(r.Models) != want {
			t.Errorf("round %d: %d models kept, want %d", round, len(r.Models), want)
		}
	}
	var r Reading
	r.Models = []Model{{Name: "late"}}
	names.Keep(&r, now.Add(2*modelNamesWindow))
	if len(r.Models) != 1 || len(names) != 1 {
		t.Errorf("after the window: %d kept, %d names held; want the new name", len(r.Models), len(names))
	}
}

func TestTakesKey(t *testing.T) {
	for _, tc := range []struct {
		t    Target
		want bool
	}{
		{Target{Kind: KindVLLM, Named: true}, true},
		{Target{Kind: KindLlamaCpp, Named: true}, true},
		{Target{Kind: KindOllama, Named: true}, false},
		{Target{Kind: KindVLLM, PID: 10}, false},
	} {
		if got := tc.t.TakesKey(); got != tc.want {
			t.Errorf("%+v: takes the key %v, want %v", tc.t, got, tc.want)
		}
	}
}
