package plan

import "testing"

// A plan that states what an anchor's measurement states — size, method,
// weights, pack, checkpointing — and leaves the optimizer to the default is
// compared like with like: it is that anchor's class, not "far above" it.
// (With fp32 AdamW as the default, a 9B full fine-tune came out twice its
// own anchor.)
func TestDefaultOptimizerIsTheAnchors(t *testing.T) {
	for _, a := range anchors {
		p := a.Plan
		p.Optimizer = ""
		m := compareAnchors(estimate(t, p))
		if m.Nearest.Name != a.Name || m.Check.Level != levelInfo {
			t.Errorf("%s with the default optimizer: nearest %s, %s: %s", a.Name, m.Nearest.Name, m.Check.Level, m.Check.Detail)
		}
	}
	// The README's example, no checkpointing and all: fits its anchor's class.
	m := compareAnchors(estimate(t, Plan{Params: 9e9, Method: methodFull}))
	if m.Nearest.Name != "9B full fine-tune" || m.Check.Level != levelInfo {
		t.Errorf("plan --model-size=9B --method=full: %s %s: %s", m.Nearest.Name, m.Check.Level, m.Check.Detail)
	}
}
