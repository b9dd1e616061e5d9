package plan

import "math"

// Estimate is the worksheet filled in for one plan, in bytes.
type Estimate struct {
	Plan Plan // completed: defaults filled in

	// Layers and HiddenSize are those given, or derived from the size
	// (Derived) when the plan gave none.
	Layers, HiddenSize int
	Derived            bool

	AdapterParams   float64 // LoRA parameters; 0 for full fine-tuning
	TrainableParams float64

	Weights     float64
	Adapters    float64
	Optimizer   float64
	Gradients   float64
	Activations float64

	Steady float64 // everything resident while training
	Load   float64 // the load transient: mmap'd weights plus their copy
	Peak   float64 // the larger of the two: what the pool must take
}

// Bytes per stored weight (docs/design.md#the-accounting-worksheet); the
// 4-bit formats' block scales (about 1/16 byte per weight) are left out.
var bytesPerWeight = map[DType]float64{
	FP32: 4, BF16: 2, FP16: 2, INT8: 1, NF4: 0.5, NVFP4: 0.5,
}

// Optimizer state per trainable parameter: AdamW's two fp32 moments,
// bitsandbytes' 8-bit AdamW about 2 B, SGD with momentum one fp32 buffer
// (plain SGD keeps nothing: an over-estimate there).
var optimizerBytes = map[Optimizer]float64{
	AdamW: 8, AdamW8bit: 2, SGD: 4,
}

// Activation bytes per token, per layer, per unit of hidden size, for 16-bit
// activations with flash/SDPA attention (no sequence² score matrix):
// Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
// Transformer Models", eq. 2 without its 5·a·s/h attention term. A count
// for a Llama block with LoRA on every projection lands on the same ≈34.
const activationBytesPerLayer = 34

// Dense-transformer shape used when the plan gives no layers or hidden size:
// about 12·L·h² parameters (attention 4h², MLP 8h²; embeddings left out),
// with h ≈ 128·L as in the Llama family (8B: 32×4096, 70B: 80×8192).
const (
	paramsPerLayerPerHidden2 = 12
	hiddenPerLayer           = 128
)

// DeriveShape guesses layers and hidden size from a parameter count.
// Activations scale with L·h, which this gets within ~15% for dense
// Llama-style models; MoE models have far fewer active parameters than
// their total, and this over-estimates them.
func DeriveShape(params float64) (layers, hidden int) {
	l := math.Cbrt(params / (paramsPerLayerPerHidden2 * hiddenPerLayer * hiddenPerLayer))
	layers = max(1, int(math.Round(l)))
	hidden = 64 * max(1, int(math.Round(hiddenPerLayer*l/64)))
	return layers, hidden
}

// DenseParams is the parameter count of a dense transformer of this shape,
// by the same 12·L·h² rule.
func DenseParams(layers, hidden int) float64 {
	return paramsPerLayerPerHidden2 * float64(layers) * float64(hidden) * float64(hidden)
}

// blockAdapterWidth is Σ(in+out) over the seven projections of a Llama-style
// block, in units of the hidden size h: q, k, v, o (h→h; grouped-query
// attention makes k and v narrower, so this over-counts slightly) and gate,
// up, down (h↔3.5h): 4·2h + 3·4.5h = 21.5h.
const blockAdapterWidth = 21.5

// computeBytes is the size of one activation or gradient value: 16-bit
// unless the run is fp32 throughout.
func computeBytes(d DType) float64 {
	if d == FP32 {
		return 4
	}
	return 2
}

// Estimate fills in the worksheet: total ≈ weights + optimizer + gradients +
// activations (+ adapters), and the load transient beside it.
func (p Plan) Estimate() (Estimate, error) {
	p, err := p.Complete()
	if err != nil {
		return Estimate{}, err
	}
	e := Estimate{Plan: p, Layers: p.Layers, HiddenSize: p.HiddenSize}
	if e.Layers == 0 {
		e.Layers, e.HiddenSize = DeriveShape(p.Params)
		e.Derived = true
	}
	layers, hidden := float64(e.Layers), float64(e.HiddenSize)
	cb := computeBytes(p.DType)

	// LoRA adds r·(in+out) parameters per adapted linear layer.
	if p.Method != Full {
		width := blockAdapterWidth * hidden
		if len(p.LoRATargets) > 0 {
			width = 0
			for _, s := range p.LoRATargets {
				width += float64(s.In + s.Out)
			}
		}
		e.AdapterParams = float64(p.LoRARank) * width * layers
		e.TrainableParams = e.AdapterParams
	} else {
		e.TrainableParams = p.Params
	}

	e.Weights = p.Params * bytesPerWeight[p.DType]
	e.Adapters = e.AdapterParams * cb
	e.Optimizer = e.TrainableParams * optimizerBytes[p.Optimizer]
	e.Gradients = e.TrainableParams * cb

	// Without checkpointing every layer keeps its activations for the
	// backward pass. With it, each layer keeps only its input (one value
	// per hidden unit) and one layer at a time is recomputed in full.
	tokens := float64(p.Pack) * float64(p.Batch)
	perToken := activationBytesPerLayer * layers
	if p.GradientCheckpointing {
		perToken = 2*layers + activationBytesPerLayer
	}
	e.Activations = tokens * hidden * perToken * cb / 2

	e.Steady = e.Weights + e.Adapters + e.Optimizer + e.Gradients + e.Activations
	// Loading mmaps the safetensors and copies them into CUDA tensors: for
	// a moment both count against the pool. Optimizer states and
	// activations come later, so the peak is whichever moment is larger.
	e.Load = 2 * e.Weights
	e.Peak = max(e.Steady, e.Load)
	return e, nil
}
