package plan

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestLoadFixture(t *testing.T) {
	plans, err := LoadFile("../../testdata/plans/spark.yml")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range plans {
		names = append(names, p.Name)
	}
	if got := strings.Join(names, " "); got != "llama-3.1-70b-qlora gemma-2-27b-lora gemma-2-9b-full" {
		t.Fatalf("plans %s, want the file's three in order", got)
	}
	// Values are parsed as the command's flags parse them, defaults filled.
	q := plans[0].Plan
	if q.Params != 70e9 || q.Method != methodQLoRA || q.DType != dtypeNF4 || q.Optimizer != optAdamW8bit ||
		!q.GradientCheckpointing || q.Pack != 2048 || q.Batch != 1 || q.LoRARank != 16 || q.Layers != 80 || q.HiddenSize != 8192 {
		t.Errorf("first plan %+v", q)
	}
	l := plans[1].Plan
	if l.LoRARank != 32 || len(l.LoRATargets) != 7 || l.LoRATargets[6] != (Shape{In: 36864, Out: 4608}) || l.DType != dtypeBF16 {
		t.Errorf("second plan %+v", l)
	}
	if f := plans[2].Plan; f.Method != methodFull || f.LoRARank != 0 || f.Pack != defaultPack {
		t.Errorf("third plan %+v", f)
	}
}

func TestBadFiles(t *testing.T) {
	// "sk-live-123" stands for anything secret a wrong line could carry:
	// it must never come back in an error.
	const secret = "sk-live-123"
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"empty", "", "no plans: the file is empty"},
		{"only a comment", "# nothing yet\n", "no plans"},
		{"empty list", "[]\n", "no plans: the list is empty"},
		{"a mapping, not a list", "name: x\nmodel-size: " + secret + "\n", "line 1: expected a list of plans"},
		{"a list of strings", "- " + secret + "\n", "plan 1 (line 1): expected fields"},
		{"a nested value", "- name: a\n  model-size: [" + secret + "]\n  method: lora\n", "plan 1 (line 2, column 15): expected a single value"},
		{"an alias", "- name: &n a\n  model-size: 7B\n  method: lora\n- name: b\n  model-size: *n\n  method: lora\n", "plan 2 (line 5, column 15): expected a single value"},
		{"unknown field", "- name: a\n  model-size: 7B\n  method: lora\n  modle-size: " + secret + "\n", "line 4, column 3: unknown field (known: name, "},
		{"duplicate key", "- name: a\n  model-size: 7B\n  model-size: 8B\n  method: lora\n", "line 3, column 3: a field given twice (first at line 2)"},
		{"syntax error", "- name: 'a\n", "line 2: found unexpected end of stream"},
		{"two documents", "- name: a\n  model-size: 7B\n  method: lora\n---\n- name: b\n", "more than one YAML document"},
		{"no name", "- model-size: 7B\n  method: lora\n", "plan 1 (line 1): name missing"},
		{"bad name", "- name: '" + secret + " with spaces'\n  model-size: 7B\n  method: lora\n", "plan 1 (line 1): name must be"},
		{"duplicate name", "- {name: a, model-size: 7B, method: lora}\n- {name: a, model-size: 8B, method: lora}\n", "plan 2 (line 2): name already used by plan 1"},
		{"no size", "- name: a\n  method: lora\n", "plan 1 (line 1): model-size: missing"},
		{"no method", "- name: a\n  model-size: 7B\n", "plan 1 (line 1): method: missing"},
		{"bad size", "- name: a\n  model-size: " + secret + "\n  method: lora\n", "plan 1 (line 2): model-size: not a parameter count"},
		{"absurd size", "- name: a\n  model-size: 1e30\n  method: lora\n", "model-size: must be between 1M and 10T"},
		{"bad method", "- name: a\n  model-size: 7B\n  method: " + secret + "\n", "method: must be one of full, lora, qlora"},
		{"bad bool", "- name: a\n  model-size: 7B\n  method: lora\n  gradient-checkpointing: " + secret + "\n", "plan 1 (line 4): gradient-checkpointing: must be true or false"},
		{"negative pack", "- name: a\n  model-size: 7B\n  method: lora\n  pack: -2048\n", "pack: must be between 1 and"},
		{"QLoRA on bf16", "- name: a\n  model-size: 7B\n  method: qlora\n  dtype: bf16\n", "plan 1 (line 4): dtype: qlora quantizes the base to nf4"},
		{"rank on full", "- name: a\n  model-size: 7B\n  method: full\n  lora-rank: 8\n", "lora-rank: only applies"},
		{"targets without layers", "- name: a\n  model-size: 7B\n  method: lora\n  lora-targets: 4096x4096\n", "lora-targets: need layers"},
		{"too many plans", strings.Repeat("- {name: a, model-size: 7B, method: lora}\n", maxPlans+1), "65 plans, more than 64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plans, err := ParseFile([]byte(tc.yaml))
			if err == nil {
				t.Fatalf("accepted: %+v", plans)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q, want it to contain %q", err, tc.want)
			}
			// A key the file gives is not repeated either (a misplaced
			// HF_TOKEN=… line is a key to YAML).
			if strings.Contains(err.Error(), "modle-size") {
				t.Errorf("error %q repeats a key of the file", err)
			}
			if strings.Contains(err.Error(), secret) || goTypeName.MatchString(err.Error()) {
				t.Errorf("error %q repeats the file's contents or Go type names", err)
			}
		})
	}
}

// goTypeName is a Go type name as the YAML decoder writes them.
var goTypeName = regexp.MustCompile(`\b(plan|planfile)\.[A-Za-z]`)

func TestLoadErrorsDoNotNamePath(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "secret-dir")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "plans.yml")
	_, err := LoadFile(missing)
	if err == nil || !strings.Contains(err.Error(), "no such file") || strings.Contains(err.Error(), "secret-dir") {
		t.Errorf("missing file: %v", err)
	}
	big := filepath.Join(dir, "big.yml")
	if err := os.WriteFile(big, make([]byte, maxFileBytes+1), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadFile(big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("oversized file: %v", err)
	}
	if _, err := LoadFile(dir); err == nil || strings.Contains(err.Error(), "secret-dir") {
		t.Errorf("directory: %v", err)
	}
}

func FuzzParseFile(f *testing.F) {
	data, err := os.ReadFile("../../testdata/plans/spark.yml")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add([]byte("- {name: a, model-size: 7B, method: lora}\n"))
	f.Add([]byte("- name: &x a\n  method: *x\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		plans, err := ParseFile(data)
		if err != nil {
			return
		}
		// Whatever is accepted can be sized.
		for _, p := range plans {
			if _, err := p.Plan.Estimate(); err != nil {
				t.Fatalf("accepted plan %q cannot be sized: %v", p.Name, err)
			}
		}
	})
}

// A file that repeats one key thousands of times, or
// holds tens of thousands of unknown keys, is refused at the first with
// an error of one short line that names neither key; a file over 1 MiB is
// refused before it is parsed.
func TestHostileFilesAreRefusedShortly(t *testing.T) {
	var unknown strings.Builder
	unknown.WriteString("- name: a\n")
	for i := range 80000 {
		fmt.Fprintf(&unknown, "  HF_TOKEN_%d: hf_x\n", i)
	}
	for name, data := range map[string]string{
		"one key 4,000 times":   "- name: a\n" + strings.Repeat("  HF_TOKEN: hf_x\n", 4000),
		"80,000 unknown keys":   unknown.String(),
		"a flow map of repeats": "- {name: a, " + strings.Repeat("HF_TOKEN: hf_x, ", 4000) + "}\n",
	} {
		_, err := ParseFile([]byte(data))
		if err == nil || len(err.Error()) > 200 || strings.Contains(err.Error(), "HF_TOKEN") || strings.Contains(err.Error(), "hf_x") {
			t.Errorf("%s: %.300v", name, err)
		}
	}
	path := filepath.Join(t.TempDir(), "plans.yml")
	if err := os.WriteFile(path, []byte(strings.Repeat("# x\n", maxFileBytes/4+1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadFile(path); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("a file over 1 MiB: %v", err)
	}
}
