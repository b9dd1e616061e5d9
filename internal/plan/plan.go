// Package plan sizes a training run against the GB10's unified memory pool
// by the worksheet of docs/design.md; callers pass the pool in, so nothing
// here reads the machine.
package plan

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// bytesPerGB: the worksheet counts in GB (10^9 bytes), not GiB.
const bytesPerGB = 1e9

// Method is how the model is trained.
type Method string

const (
	methodFull  Method = "full"  // every weight is trainable
	methodLoRA  Method = "lora"  // frozen base, low-rank adapters trained
	methodQLoRA Method = "qlora" // LoRA on a base quantized to NF4 at load
)

var methods = []Method{methodFull, methodLoRA, methodQLoRA}

// DType is the storage type of the base weights.
type DType string

const (
	dtypeFP32  DType = "fp32"
	dtypeBF16  DType = "bf16"
	dtypeFP16  DType = "fp16"
	dtypeINT8  DType = "int8"
	dtypeNF4   DType = "nf4"
	dtypeNVFP4 DType = "nvfp4" // Blackwell's native 4-bit format, as in the ~120B MoE anchor
)

var dtypes = []DType{dtypeFP32, dtypeBF16, dtypeFP16, dtypeINT8, dtypeNF4, dtypeNVFP4}

// Optimizer is the optimizer whose states are kept per trainable parameter.
type Optimizer string

const (
	optAdamW     Optimizer = "adamw"      // fp32 first and second moments
	optAdamW8bit Optimizer = "adamw-8bit" // bitsandbytes' quantized moments
	optSGD       Optimizer = "sgd"        // with momentum: one fp32 buffer
)

var optimizers = []Optimizer{optAdamW, optAdamW8bit, optSGD}

// Shape is one adapted linear layer, in features to out features.
type Shape struct{ In, Out int }

// Plan is a training run to size; zero values mean the default (see
// Complete), zero Layers and HiddenSize "derive them from Params".
type Plan struct {
	Params                float64 // parameter count
	Method                Method
	DType                 DType
	Optimizer             Optimizer
	LoRARank              int
	LoRATargets           []Shape // adapted linear layers of one transformer block
	GradientCheckpointing bool
	Pack                  int // packing (sequence) length in tokens
	Batch                 int // sequences per step on the device
	Layers                int
	HiddenSize            int
}

const (
	defaultRank  = 16
	defaultPack  = 2048
	defaultBatch = 1
	// What the anchors ran with: Unsloth's default on a Spark.
	defaultOptimizer = optAdamW8bit
)

// Input bounds: anything outside is a typo or a unit mistake.
const (
	minParams = 1e6
	maxParams = 1e13
	maxRank   = 4096
	maxPack   = 1 << 20
	maxBatch  = 1 << 16
	maxLayers = 1024
	maxHidden = 1 << 18
	maxShapes = 64
	maxDim    = 1 << 20
)

// FieldError is a bad plan input; Field is the flag's name and the file's key.
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Err: fmt.Errorf(format, args...)}
}

// parseModelSize reads a parameter count: 70B, 7.5b, 350M, 1.2T or 8e9.
func parseModelSize(s string) (float64, error) {
	t := strings.TrimSpace(s)
	mult := 1.0
	if t != "" {
		switch t[len(t)-1] {
		case 'k', 'K':
			mult = 1e3
		case 'm', 'M':
			mult = 1e6
		case 'b', 'B':
			mult = 1e9
		case 't', 'T':
			mult = 1e12
		}
		if mult != 1 {
			t = t[:len(t)-1]
		}
	}
	// strconv.ParseFloat also takes hex floats, "inf" and "nan".
	if t == "" || strings.Trim(t, "0123456789.eE+-") != "" {
		return 0, errors.New("not a parameter count; write it as 70B, 350M or 8e9")
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil {
		return 0, errors.New("not a parameter count; write it as 70B, 350M or 8e9")
	}
	n := f * mult
	if !(n >= minParams && n <= maxParams) {
		return 0, errors.New("must be between 1M and 10T parameters")
	}
	return n, nil
}

func parseWord[T ~string](s string, options []T) (T, error) {
	for _, o := range options {
		if string(o) == s {
			return o, nil
		}
	}
	names := make([]string, len(options))
	for i, o := range options {
		names[i] = string(o)
	}
	return "", fmt.Errorf("must be one of %s", strings.Join(names, ", "))
}

func parseMethod(s string) (Method, error) { return parseWord(s, methods) }

func parseDType(s string) (DType, error) { return parseWord(s, dtypes) }

func parseOptimizer(s string) (Optimizer, error) { return parseWord(s, optimizers) }

// parseShapes reads IN×OUT pairs: 4096x4096,4096x1024.
func parseShapes(s string) ([]Shape, error) {
	parts := strings.Split(s, ",")
	if len(parts) > maxShapes {
		return nil, fmt.Errorf("more than %d shapes", maxShapes)
	}
	shapes := make([]Shape, 0, len(parts))
	for _, p := range parts {
		in, out, ok := strings.Cut(strings.TrimSpace(p), "x")
		a, errA := strconv.Atoi(in)
		b, errB := strconv.Atoi(out)
		if !ok || errA != nil || errB != nil {
			return nil, errors.New("not a list of IN×OUT shapes; write them as 4096x4096,4096x1024")
		}
		if a < 1 || b < 1 || a > maxDim || b > maxDim {
			return nil, fmt.Errorf("dimensions must be between 1 and %d", maxDim)
		}
		shapes = append(shapes, Shape{a, b})
	}
	return shapes, nil
}

func parseCount(max int) func(string) (int, error) {
	return func(s string) (int, error) {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return 0, errors.New("not a whole number")
		}
		if n < 1 || n > max {
			return 0, fmt.Errorf("must be between 1 and %d", max)
		}
		return n, nil
	}
}

var (
	parseRank   = parseCount(maxRank)
	parsePack   = parseCount(maxPack)
	parseBatch  = parseCount(maxBatch)
	parseLayers = parseCount(maxLayers)
	parseHidden = parseCount(maxHidden)
)

// quantized weights are frozen storage an optimizer cannot update in place.
func (d DType) quantized() bool { return d == dtypeINT8 || d == dtypeNF4 || d == dtypeNVFP4 }

// Complete checks the plan and fills in its defaults; its errors are *FieldError.
func (p Plan) Complete() (Plan, error) {
	if !(p.Params >= minParams && p.Params <= maxParams) {
		return p, fieldErr("model-size", "must be between 1M and 10T parameters")
	}
	if _, err := parseMethod(string(p.Method)); err != nil {
		return p, &FieldError{"method", err}
	}
	lora := p.Method == methodLoRA || p.Method == methodQLoRA
	switch {
	case p.DType == "" && p.Method == methodQLoRA:
		p.DType = dtypeNF4
	case p.DType == "":
		p.DType = dtypeBF16
	case p.Method == methodFull && p.DType.quantized():
		return p, fieldErr("dtype", "%s weights cannot be trained in place; full fine-tuning needs fp32, bf16 or fp16 (or use method qlora)", p.DType)
	case p.Method == methodQLoRA && p.DType != dtypeNF4:
		return p, fieldErr("dtype", "qlora quantizes the base to nf4; for %s weights use method lora", p.DType)
	case p.Method == methodLoRA && p.DType == dtypeNF4:
		return p, fieldErr("dtype", "LoRA on an nf4 base is qlora; use method qlora")
	}
	if _, err := parseDType(string(p.DType)); err != nil {
		return p, &FieldError{"dtype", err}
	}
	if p.Optimizer == "" {
		p.Optimizer = defaultOptimizer
	}
	if _, err := parseOptimizer(string(p.Optimizer)); err != nil {
		return p, &FieldError{"optimizer", err}
	}
	switch {
	case !lora && p.LoRARank != 0:
		return p, fieldErr("lora-rank", "only applies to methods lora and qlora")
	case !lora && len(p.LoRATargets) > 0:
		return p, fieldErr("lora-targets", "only apply to methods lora and qlora")
	case lora && p.LoRARank == 0:
		p.LoRARank = defaultRank
	}
	if p.LoRARank < 0 || p.LoRARank > maxRank {
		return p, fieldErr("lora-rank", "must be between 1 and %d", maxRank)
	}
	if p.Pack == 0 {
		p.Pack = defaultPack
	}
	if p.Batch == 0 {
		p.Batch = defaultBatch
	}
	if p.Pack < 1 || p.Pack > maxPack {
		return p, fieldErr("pack", "must be between 1 and %d", maxPack)
	}
	if p.Batch < 1 || p.Batch > maxBatch {
		return p, fieldErr("batch", "must be between 1 and %d", maxBatch)
	}
	switch {
	case p.Layers < 0 || p.Layers > maxLayers:
		return p, fieldErr("layers", "must be between 1 and %d", maxLayers)
	case p.HiddenSize < 0 || p.HiddenSize > maxHidden:
		return p, fieldErr("hidden-size", "must be between 1 and %d", maxHidden)
	case p.Layers != 0 && p.HiddenSize == 0:
		return p, fieldErr("hidden-size", "needed with layers: the activation term uses both")
	case p.HiddenSize != 0 && p.Layers == 0:
		return p, fieldErr("layers", "needed with hidden-size: the activation term uses both")
	case len(p.LoRATargets) > 0 && p.Layers == 0:
		return p, fieldErr("lora-targets", "need layers and hidden-size: the shapes are those of one block")
	case lora && p.HiddenSize != 0 && p.LoRARank > p.HiddenSize:
		return p, fieldErr("lora-rank", "larger than hidden-size %d", p.HiddenSize)
	}
	if len(p.LoRATargets) > maxShapes {
		return p, fieldErr("lora-targets", "more than %d shapes", maxShapes)
	}
	for _, s := range p.LoRATargets {
		if s.In < 1 || s.Out < 1 || s.In > maxDim || s.Out > maxDim {
			return p, fieldErr("lora-targets", "dimensions must be between 1 and %d", maxDim)
		}
	}
	return p, nil
}

// formatParams writes a parameter count as docs/design.md does: 70B, 222M.
func formatParams(n float64) string {
	for _, u := range []struct {
		div    float64
		suffix string
	}{{1e12, "T"}, {1e9, "B"}, {1e6, "M"}, {1e3, "K"}} {
		if n >= u.div {
			v := n / u.div
			if v >= 100 || v == math.Trunc(v) {
				return strconv.FormatFloat(math.Round(v), 'f', -1, 64) + u.suffix
			}
			return strconv.FormatFloat(v, 'f', 1, 64) + u.suffix
		}
	}
	return strconv.FormatFloat(n, 'f', 0, 64)
}
