package plan

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func estimate(t *testing.T, p Plan) Estimate {
	t.Helper()
	e, err := p.Estimate()
	if err != nil {
		t.Fatalf("%+v: %v", p, err)
	}
	return e
}

func near(got, want, tolerance float64) bool { return math.Abs(got-want) <= tolerance }

func TestWeightBytesPerParameter(t *testing.T) {
	// The table of docs/design.md: fp32 4, bf16/fp16 2, int8 1, NF4 0.5 bytes.
	for _, tc := range []struct {
		method Method
		dtype  DType
		want   float64 // bytes for 1e9 parameters
	}{
		{methodFull, dtypeFP32, 4e9},
		{methodFull, dtypeBF16, 2e9},
		{methodFull, dtypeFP16, 2e9},
		{methodLoRA, dtypeINT8, 1e9},
		{methodQLoRA, dtypeNF4, 0.5e9},
		{methodLoRA, dtypeNVFP4, 0.5e9},
		{methodQLoRA, "", 0.5e9}, // qlora defaults to nf4
		{methodLoRA, "", 2e9},    // lora and full default to bf16
		{methodFull, "", 2e9},
	} {
		e := estimate(t, Plan{Params: 1e9, Method: tc.method, DType: tc.dtype})
		if e.Weights != tc.want {
			t.Errorf("%s %s: weights %v, want %v", tc.method, tc.dtype, e.Weights, tc.want)
		}
	}
}

func TestOptimizerAndGradientsPerTrainableParameter(t *testing.T) {
	for _, tc := range []struct {
		dtype          DType
		opt            Optimizer
		optimizer      float64
		gradients      float64
		defaultApplied bool
	}{
		{dtypeBF16, optAdamW, 8e9, 2e9, false},     // two fp32 moments
		{dtypeBF16, "", 2e9, 2e9, true},            // adamw-8bit is the default
		{dtypeBF16, optAdamW8bit, 2e9, 2e9, false}, // docs/design.md's ≈2 B
		{dtypeBF16, optSGD, 4e9, 2e9, false},       // momentum buffer, fp32 (assumed)
		{dtypeFP32, optAdamW, 8e9, 4e9, false},     // fp32 training: fp32 gradients
	} {
		e := estimate(t, Plan{Params: 1e9, Method: methodFull, DType: tc.dtype, Optimizer: tc.opt})
		if e.TrainableParams != 1e9 || e.Optimizer != tc.optimizer || e.Gradients != tc.gradients {
			t.Errorf("%s %q: trainable %v optimizer %v gradients %v, want 1e9 %v %v",
				tc.dtype, tc.opt, e.TrainableParams, e.Optimizer, e.Gradients, tc.optimizer, tc.gradients)
		}
		if tc.defaultApplied && e.Plan.Optimizer != optAdamW8bit {
			t.Errorf("default optimizer %q, want adamw-8bit", e.Plan.Optimizer)
		}
	}
}

func TestLoRAAdapters(t *testing.T) {
	// Explicit shapes: rank 8 × ((64+64) + (64+128)) × 2 layers = 5120
	// parameters, the only trainable ones.
	e := estimate(t, Plan{Params: 1e6, Method: methodLoRA, LoRARank: 8, Layers: 2, HiddenSize: 64,
		LoRATargets: []Shape{{64, 64}, {64, 128}}, Optimizer: optAdamW})
	if e.AdapterParams != 5120 || e.TrainableParams != 5120 {
		t.Errorf("adapter params %v trainable %v, want 5120", e.AdapterParams, e.TrainableParams)
	}
	if e.Adapters != 5120*2 || e.Optimizer != 5120*8 || e.Gradients != 5120*2 {
		t.Errorf("adapters %v optimizer %v gradients %v, want 10240 40960 10240", e.Adapters, e.Optimizer, e.Gradients)
	}

	// No shapes: the seven projections of a Llama block, 21.5·h per layer.
	e = estimate(t, Plan{Params: 1e9, Method: methodQLoRA, LoRARank: 16, Layers: 10, HiddenSize: 1000})
	if want := 16 * 21.5 * 1000 * 10.0; e.AdapterParams != want {
		t.Errorf("default adapter params %v, want %v", e.AdapterParams, want)
	}

	// docs/design.md: ≪1% of the model at usual ranks; a 70B model at rank 16
	// carries about 0.5 GB of adapter.
	e = estimate(t, Plan{Params: 70e9, Method: methodQLoRA})
	if frac := e.AdapterParams / 70e9; frac > 0.01 {
		t.Errorf("rank-16 adapters are %.2f%% of 70B, want ≪1%%", 100*frac)
	}
	if !near(e.Adapters, 0.5*bytesPerGB, 0.1*bytesPerGB) {
		t.Errorf("70B rank-16 adapters %.2f GB, want ≈0.5 GB (≪1%% of the model at rank 16, docs/design.md)", e.Adapters/bytesPerGB)
	}
}

func TestActivations(t *testing.T) {
	base := Plan{Params: 1e9, Method: methodFull, Layers: 10, HiddenSize: 1000, Pack: 1024, Batch: 2}
	for _, tc := range []struct {
		name   string
		change func(*Plan)
		want   float64
	}{
		// 2048 tokens × 1000 hidden × 34 × 10 layers, 16-bit.
		{"no checkpointing", func(*Plan) {}, 2048 * 1000 * 34 * 10},
		// Each layer keeps its input (2 B × hidden); one layer recomputed.
		{"checkpointing", func(p *Plan) { p.GradientCheckpointing = true }, 2048 * 1000 * (2*10 + 34)},
		// Per token, pack and batch weigh the same.
		{"pack and batch swapped", func(p *Plan) { p.Pack, p.Batch = 2048, 1 }, 2048 * 1000 * 34 * 10},
		{"fp32 activations", func(p *Plan) { p.DType = dtypeFP32 }, 2 * 2048 * 1000 * 34 * 10},
	} {
		p := base
		tc.change(&p)
		if e := estimate(t, p); e.Activations != tc.want {
			t.Errorf("%s: activations %v, want %v", tc.name, e.Activations, tc.want)
		}
	}
}

func TestDerivedShape(t *testing.T) {
	// Activations scale with layers × hidden; the derived shape should land
	// within ~20% of real dense models' L·h.
	for _, tc := range []struct {
		params        float64
		layers, width int
	}{
		{8e9, 32, 4096},  // Llama 3 8B
		{70e9, 80, 8192}, // Llama 3 70B
		{9e9, 42, 3584},  // Gemma 2 9B
	} {
		l, h := deriveShape(tc.params)
		got, want := float64(l*h), float64(tc.layers*tc.width)
		if got < 0.8*want || got > 1.25*want {
			t.Errorf("%s: derived %d×%d (L·h %v), real %d×%d (L·h %v)", formatParams(tc.params), l, h, got, tc.layers, tc.width, want)
		}
	}
	e := estimate(t, Plan{Params: 70e9, Method: methodQLoRA})
	if !e.Derived || e.Layers == 0 || e.HiddenSize == 0 {
		t.Errorf("no shape derived: %+v", e)
	}
	if e = estimate(t, Plan{Params: 70e9, Method: methodQLoRA, Layers: 80, HiddenSize: 8192}); e.Derived || e.Layers != 80 {
		t.Errorf("given shape not used: %+v", e)
	}
}

func TestLoadTransient(t *testing.T) {
	// QLoRA: the weights twice (mmap'd + CUDA copy) outweigh training.
	e := estimate(t, Plan{Params: 70e9, Method: methodQLoRA, GradientCheckpointing: true})
	if e.Load != 70*bytesPerGB || e.Peak != e.Load || e.Steady >= e.Load {
		t.Errorf("load %v peak %v steady %v: want the load transient 70 GB as the peak", e.Load, e.Peak, e.Steady)
	}
	// Full fine-tuning: optimizer states and gradients outweigh the load.
	e = estimate(t, Plan{Params: 9e9, Method: methodFull, Optimizer: optAdamW8bit})
	if e.Peak != e.Steady || e.Load != 36*bytesPerGB {
		t.Errorf("load %v peak %v steady %v: want the steady state as the peak", e.Load, e.Peak, e.Steady)
	}
	if sum := e.Weights + e.Adapters + e.Optimizer + e.Gradients + e.Activations; sum != e.Steady {
		t.Errorf("steady %v is not the sum of its parts %v", e.Steady, sum)
	}
}

func TestCompleteRefusesBadPlans(t *testing.T) {
	for _, tc := range []struct {
		plan  Plan
		field string
		msg   string
	}{
		{Plan{Params: 0, Method: methodLoRA}, "model-size", "between"},
		{Plan{Params: 1e20, Method: methodLoRA}, "model-size", "between"},
		{Plan{Params: math.NaN(), Method: methodLoRA}, "model-size", "between"},
		{Plan{Params: 1e9, Method: "dpo"}, "method", "one of full, lora, qlora"},
		{Plan{Params: 1e9, Method: methodFull, DType: dtypeNF4}, "dtype", "cannot be trained"},
		{Plan{Params: 1e9, Method: methodFull, DType: dtypeINT8}, "dtype", "cannot be trained"},
		{Plan{Params: 1e9, Method: methodQLoRA, DType: dtypeBF16}, "dtype", "use method lora"},
		{Plan{Params: 1e9, Method: methodLoRA, DType: dtypeNF4}, "dtype", "use method qlora"},
		{Plan{Params: 1e9, Method: methodLoRA, DType: "fp8"}, "dtype", "one of"},
		{Plan{Params: 1e9, Method: methodLoRA, Optimizer: "lion"}, "optimizer", "one of"},
		{Plan{Params: 1e9, Method: methodFull, LoRARank: 16}, "lora-rank", "only applies"},
		{Plan{Params: 1e9, Method: methodFull, LoRATargets: []Shape{{1, 1}}}, "lora-targets", "only apply"},
		{Plan{Params: 1e9, Method: methodLoRA, LoRARank: -1}, "lora-rank", "between"},
		{Plan{Params: 1e9, Method: methodLoRA, Pack: -5}, "pack", "between"},
		{Plan{Params: 1e9, Method: methodLoRA, Batch: 1 << 30}, "batch", "between"},
		{Plan{Params: 1e9, Method: methodLoRA, Layers: 32}, "hidden-size", "needed with layers"},
		{Plan{Params: 1e9, Method: methodLoRA, HiddenSize: 4096}, "layers", "needed with hidden-size"},
		{Plan{Params: 1e9, Method: methodLoRA, LoRATargets: []Shape{{64, 64}}}, "lora-targets", "need layers"},
		{Plan{Params: 1e9, Method: methodLoRA, LoRARank: 256, Layers: 4, HiddenSize: 128}, "lora-rank", "larger than hidden-size"},
	} {
		_, err := tc.plan.Estimate()
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%+v: error %v, want one on %s containing %q", tc.plan, err, tc.field, tc.msg)
		}
	}
}

func TestParseModelSize(t *testing.T) {
	for in, want := range map[string]float64{
		"70B": 70e9, "70b": 70e9, "7.5B": 7.5e9, "8e9": 8e9, "350M": 350e6, "1.2T": 1.2e12,
		" 9B ": 9e9, "70000000000": 70e9, "500K": 0, "1e400": 0, "-7B": 0, "0x1p30": 0,
		"inf": 0, "NaN": 0, "B": 0, "": 0, "70GB": 0, "seventy": 0, "1e5": 0,
	} {
		got, err := parseModelSize(in)
		if want == 0 {
			if err == nil {
				t.Errorf("%q accepted as %v", in, got)
			}
			continue
		}
		if err != nil || !near(got, want, want*1e-12) {
			t.Errorf("%q = %v, %v; want %v", in, got, err, want)
		}
	}
}

func FuzzParseModelSize(f *testing.F) {
	for _, s := range []string{"70B", "8e9", "1.5t", "350M", "", "1e400", "NaN", "0x1p30"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parseModelSize(s)
		if err == nil && !(n >= minParams && n <= maxParams) {
			t.Fatalf("%q gave %v, outside the limits", s, n)
		}
	})
}

func TestParseShapes(t *testing.T) {
	got, err := parseShapes("4096x4096, 4096x1024,14336x4096")
	if err != nil || len(got) != 3 || got[1] != (Shape{4096, 1024}) || got[2] != (Shape{14336, 4096}) {
		t.Errorf("got %v, %v", got, err)
	}
	for _, bad := range []string{"", "4096", "4096x", "x4096", "0x10", "10x-1", "4096*4096", "1x1,", "99999999x1",
		strings.Repeat("1x1,", maxShapes) + "1x1"} {
		if s, err := parseShapes(bad); err == nil {
			t.Errorf("%q accepted as %v", bad, s)
		}
	}
}

func FuzzParseShapes(f *testing.F) {
	for _, s := range []string{"4096x4096,4096x1024", "1x1", "", "x", "0x0", "-1x5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		shapes, err := parseShapes(s)
		if err != nil {
			return
		}
		for _, sh := range shapes {
			if sh.In < 1 || sh.Out < 1 || sh.In > maxDim || sh.Out > maxDim {
				t.Fatalf("%q gave shape %v outside the limits", s, sh)
			}
		}
	})
}

func TestFormatParams(t *testing.T) {
	for n, want := range map[float64]string{70e9: "70B", 7.5e9: "7.5B", 221.97e6: "222M", 1.2e12: "1.2T", 500: "500"} {
		if got := formatParams(n); got != want {
			t.Errorf("FormatParams(%v) = %q, want %q", n, got, want)
		}
	}
}
