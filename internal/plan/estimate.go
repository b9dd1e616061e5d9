package plan

import "math"

// Estimate is the worksheet filled in for one plan, in bytes.
type Estimate struct {
	Plan Plan // completed: defaults filled in

	Layers, HiddenSize int
	Derived            bool // Layers and HiddenSize came from the size

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

// The bytes per weight and per optimizer state, and the activation term, are
// docs/design.md#the-accounting-worksheet's.
var bytesPerWeight = map[DType]float64{
	dtypeFP32: 4, dtypeBF16: 2, dtypeFP16: 2, dtypeINT8: 1, dtypeNF4: 0.5, dtypeNVFP4: 0.5,
}

var optimizerBytes = map[Optimizer]float64{
	optAdamW: 8, optAdamW8bit: 2, optSGD: 4,
}

// activationBytesPerLayer is per token per hidden unit: Korthikanti et al.
// 2022, eq. 2 without its attention-score term (flash attention).
const activationBytesPerLayer = 34

// A dense transformer has about 12·L·h² parameters, with h ≈ 128·L in the
// Llama family (8B: 32×4096, 70B: 80×8192).
const (
	paramsPerLayerPerHidden2 = 12
	hiddenPerLayer           = 128
)

// deriveShape gets L·h within ~15% for dense Llama-style models; it
// over-estimates MoE models, whose active parameters are far fewer.
func deriveShape(params float64) (layers, hidden int) {
	l := math.Cbrt(params / (paramsPerLayerPerHidden2 * hiddenPerLayer * hiddenPerLayer))
	layers = max(1, int(math.Round(l)))
	hidden = 64 * max(1, int(math.Round(hiddenPerLayer*l/64)))
	return layers, hidden
}

func denseParams(layers, hidden int) float64 {
	return paramsPerLayerPerHidden2 * float64(layers) * float64(hidden) * float64(hidden)
}

// blockAdapterWidth is Σ(in+out) over a Llama block's projections in units of
// h: q, k, v, o (h→h) and gate, up, down (h↔3.5h). Grouped-query attention
// makes k and v narrower, so it over-counts slightly.
const blockAdapterWidth = 21.5

func computeBytes(d DType) float64 {
	if d == dtypeFP32 {
		return 4
	}
	return 2
}

// Estimate fills in the worksheet for the completed plan.
func (p Plan) Estimate() (Estimate, error) {
	p, err := p.Complete()
	if err != nil {
		return Estimate{}, err
	}
	e := Estimate{Plan: p, Layers: p.Layers, HiddenSize: p.HiddenSize}
	if e.Layers == 0 {
		e.Layers, e.HiddenSize = deriveShape(p.Params)
		e.Derived = true
	}
	layers, hidden := float64(e.Layers), float64(e.HiddenSize)
	cb := computeBytes(p.DType)

	if p.Method != methodFull {
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

	// Checkpointed, each layer keeps only its input and one is recomputed at a time.
	tokens := float64(p.Pack) * float64(p.Batch)
	perToken := activationBytesPerLayer * layers
	if p.GradientCheckpointing {
		perToken = 2*layers + activationBytesPerLayer
	}
	e.Activations = tokens * hidden * perToken * cb / 2

	e.Steady = e.Weights + e.Adapters + e.Optimizer + e.Gradients + e.Activations
	// Loading mmaps the safetensors and copies them into CUDA tensors, both
	// in the pool at once, before any optimizer state or activation.
	e.Load = 2 * e.Weights
	e.Peak = max(e.Steady, e.Load)
	return e, nil
}
