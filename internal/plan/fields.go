package plan

import (
	"errors"
	"strconv"
)

// Field is one input of a plan. The plan command makes a flag of each
// (--model-size) and the plan file takes each as a key (model-size:), both
// under Name, so that the two cannot drift apart: they are this one table.
type Field struct {
	// Name is the flag's name without its dashes and the file's key, and the
	// Field of a bad value's FieldError.
	Name string
	Help string
	// PlaceHolder stands for the value in --help; "" for switches.
	PlaceHolder string
	// Default is the flag's default as written on a command line; "" for none.
	// A file that leaves the key out gets the same value from Plan.Complete.
	Default string
	// Required fields must be given, as a flag or as a key.
	Required bool
	// Switch fields are true or false: --name or --no-name, or a key's value.
	Switch bool
	// Set parses a value and stores it in p. Its errors name neither the field
	// nor the value.
	Set func(p *Plan, value string) error
}

// Fields are a plan's inputs, in the order --help lists them.
var Fields = []Field{
	{Name: "model-size", Help: "Parameter count: 70B, 7.5B, 350M or 8e9.", PlaceHolder: "70B", Required: true,
		Set: into(func(p *Plan) *float64 { return &p.Params }, ParseModelSize)},
	{Name: "method", Help: "Training method: full, lora or qlora.", PlaceHolder: "qlora", Required: true,
		Set: into(func(p *Plan) *Method { return &p.Method }, ParseMethod)},
	{Name: "dtype", Help: "Base weight type: fp32, bf16, fp16, int8, nf4, nvfp4 (default: nf4 for qlora, bf16 otherwise).", PlaceHolder: "bf16",
		Set: into(func(p *Plan) *DType { return &p.DType }, ParseDType)},
	{Name: "optimizer", Help: "Optimizer: adamw (fp32 states, 8 B per trainable parameter), adamw-8bit (≈2 B) or sgd (with momentum, 4 B) (default: adamw-8bit, as Unsloth trains and the measured anchors ran; Transformers' Trainer alone uses adamw).", PlaceHolder: "adamw-8bit",
		Set: into(func(p *Plan) *Optimizer { return &p.Optimizer }, ParseOptimizer)},
	{Name: "lora-rank", Help: "LoRA rank, lora and qlora only (default: 16).", PlaceHolder: "16",
		Set: into(func(p *Plan) *int { return &p.LoRARank }, ParseRank)},
	{Name: "lora-targets", Help: "Adapted linear layers of one block as IN×OUT, comma-separated (4096x4096,4096x1024,…); needs --layers (default: the seven projections of a Llama block).", PlaceHolder: "INxOUT,…",
		Set: into(func(p *Plan) *[]Shape { return &p.LoRATargets }, ParseShapes)},
	{Name: "gradient-checkpointing", Help: "Gradient checkpointing is on (recompute activations in the backward pass).", Switch: true,
		Set: into(func(p *Plan) *bool { return &p.GradientCheckpointing }, parseBool)},
	{Name: "pack", Help: "Packing (sequence) length in tokens.", Default: strconv.Itoa(DefaultPack),
		Set: into(func(p *Plan) *int { return &p.Pack }, ParsePack)},
	{Name: "batch", Help: "Sequences per step on the device.", Default: strconv.Itoa(DefaultBatch),
		Set: into(func(p *Plan) *int { return &p.Batch }, ParseBatch)},
	{Name: "layers", Help: "Transformer layers, with --hidden-size (default: derived from the size).", PlaceHolder: "N",
		Set: into(func(p *Plan) *int { return &p.Layers }, ParseLayers)},
	{Name: "hidden-size", Help: "Hidden size, with --layers (default: derived from the size).", PlaceHolder: "N",
		Set: into(func(p *Plan) *int { return &p.HiddenSize }, ParseHidden)},
}

// into makes a Field's Set from the plan member it fills and its parser.
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
