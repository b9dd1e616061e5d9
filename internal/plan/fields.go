package plan

import (
	"errors"
	"strconv"
)

// Field is one input of a plan, both the plan command's flag and the plan
// file's key, so that the two cannot drift apart.
type Field struct {
	Name        string
	Help        string
	PlaceHolder string // "" for switches
	Default     string // as on a command line; Plan.Complete gives a file the same
	Required    bool
	Switch      bool
	Set         func(p *Plan, value string) error // errors name neither field nor value
}

// Fields are a plan's inputs, in --help's order.
var Fields = []Field{
	{Name: "model-size", Help: "Parameter count: 70B, 7.5B, 350M or 8e9.", PlaceHolder: "70B", Required: true,
		Set: into(func(p *Plan) *float64 { return &p.Params }, parseModelSize)},
	{Name: "method", Help: "Training method: full, lora or qlora.", PlaceHolder: "qlora", Required: true,
		Set: into(func(p *Plan) *Method { return &p.Method }, parseMethod)},
	{Name: "dtype", Help: "Base weight type: fp32, bf16, fp16, int8, nf4, nvfp4 (default: nf4 for qlora, bf16 otherwise).", PlaceHolder: "bf16",
		Set: into(func(p *Plan) *DType { return &p.DType }, parseDType)},
	{Name: "optimizer", Help: "Optimizer: adamw (fp32 states, 8 B per trainable parameter), adamw-8bit (≈2 B) or sgd (with momentum, 4 B) (default: adamw-8bit, as Unsloth trains and the measured anchors ran; Transformers' Trainer alone uses adamw).", PlaceHolder: "adamw-8bit",
		Set: into(func(p *Plan) *Optimizer { return &p.Optimizer }, parseOptimizer)},
	{Name: "lora-rank", Help: "LoRA rank, lora and qlora only (default: 16).", PlaceHolder: "16",
		Set: into(func(p *Plan) *int { return &p.LoRARank }, parseRank)},
	{Name: "lora-targets", Help: "Adapted linear layers of one block as IN×OUT, comma-separated (4096x4096,4096x1024,…); needs --layers (default: the seven projections of a Llama block).", PlaceHolder: "INxOUT,…",
		Set: into(func(p *Plan) *[]Shape { return &p.LoRATargets }, parseShapes)},
	{Name: "gradient-checkpointing", Help: "Gradient checkpointing is on (recompute activations in the backward pass).", Switch: true,
		Set: into(func(p *Plan) *bool { return &p.GradientCheckpointing }, parseBool)},
	{Name: "pack", Help: "Packing (sequence) length in tokens.", Default: strconv.Itoa(defaultPack),
		Set: into(func(p *Plan) *int { return &p.Pack }, parsePack)},
	{Name: "batch", Help: "Sequences per step on the device.", Default: strconv.Itoa(defaultBatch),
		Set: into(func(p *Plan) *int { return &p.Batch }, parseBatch)},
	{Name: "layers", Help: "Transformer layers, with --hidden-size (default: derived from the size).", PlaceHolder: "N",
		Set: into(func(p *Plan) *int { return &p.Layers }, parseLayers)},
	{Name: "hidden-size", Help: "Hidden size, with --layers (default: derived from the size).", PlaceHolder: "N",
		Set: into(func(p *Plan) *int { return &p.HiddenSize }, parseHidden)},
}

func into[T any](member func(*Plan) *T, parse func(string) (T, error)) func(*Plan, string) error {
	return func(p *Plan, s string) error {
		v, err := parse(s)
		if err == nil {
			*member(p) = v
		}
		return err
	}
}

func parseBool(s string) (bool, error) {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return false, errors.New("must be true or false")
	}
	return b, nil
}
