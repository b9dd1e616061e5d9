// Package plan sizes a training run against the 128 GB unified memory pool
// the GB10's CPU and GPU share, for the plan command and the plan collector:
// the accounting worksheet (docs/design.md), its comparison with the runs
// measured on one Spark, the fields the command's flags and the plan file's
// keys share, the plan file reader, and the report.
//
// Nothing here reads the machine: callers pass the pool (internal/pool) in,
// so that every judgement is a function of plain values.
package plan

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// GB is the unit of the worksheet and of every figure this package
// prints: 10^9 bytes, not GiB.
const GB = 1e9

// Method is how the model is trained.
type Method string

const (
	Full  Method = "full"  // every weight is trainable
	LoRA  Method = "lora"  // frozen base, low-rank adapters trained
	QLoRA Method = "qlora" // LoRA on a base quantized to NF4 at load
)

var methods = []Method{Full, LoRA, QLoRA}

// DType is the storage type of the base weights.
type DType string

const (
	FP32  DType = "fp32"
	BF16  DType = "bf16"
	FP16  DType = "fp16"
	INT8  DType = "int8"
	NF4   DType = "nf4"
	NVFP4 DType = "nvfp4" // Blackwell's native 4-bit format, as in the ~120B MoE anchor
)

var dtypes = []DType{FP32, BF16, FP16, INT8, NF4, NVFP4}

// Optimizer is the optimizer whose states are kept per trainable parameter.
type Optimizer string

const (
	AdamW     Optimizer = "adamw"      // fp32 first and second moments
	AdamW8bit Optimizer = "adamw-8bit" // bitsandbytes' quantized moments
	SGD       Optimizer = "sgd"        // with momentum: one fp32 buffer
)

var optimizers = []Optimizer{AdamW, AdamW8bit, SGD}

// Shape is one adapted linear layer, in features to out features.
type Shape struct{ In, Out int }

// Plan is a training run to size. The zero values of DType, Optimizer,
// LoRARank, Pack and Batch mean "the default" (see Complete); Layers and
// HiddenSize zero mean "derive them from Params".
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

// Defaults the plan command documents in its --help.
const (
	DefaultRank  = 16
	DefaultPack  = 2048
	DefaultBatch = 1
	// DefaultOptimizer is what the anchors ran with: Unsloth, on a Spark,
	// trains with bitsandbytes' 8-bit AdamW unless told otherwise.
	DefaultOptimizer = AdamW8bit
)

// Limits on inputs: anything outside is a typo or a unit mistake, refused
// rather than sized.
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

// FieldError is a bad plan input. Field is the name the plan command's flag
// and the plan file's key share (model-size, dtype, …), so that each caller
// can point at its own spelling of it.
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Err: fmt.Errorf(format, args...)}
}

// ParseModelSize reads a parameter count: 70B, 7.5b, 350M, 1.2T or 8e9.
func ParseModelSize(s string) (float64, error) {
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

// ParseMethod reads full, lora or qlora.
func ParseMethod(s string) (Method, error) { return parseWord(s, methods) }

// ParseDType reads a weight storage type.
func ParseDType(s string) (DType, error) { return parseWord(s, dtypes) }

// ParseOptimizer reads adamw, adamw-8bit or sgd.
func ParseOptimizer(s string) (Optimizer, error) { return parseWord(s, optimizers) }

// ParseShapes reads the adapted linear layers of one block as IN×OUT pairs
// separated by commas: 4096x4096,4096x1024,4096x14336.
func ParseShapes(s string) ([]Shape, error) {
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

// ParseCount returns a parser of whole numbers within [1, max].
func ParseCount(max int) func(string) (int, error) {
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

// Field parsers under the names the plan command's flags and the plan
// file's keys share.
var (
	ParseRank   = ParseCount(maxRank)
	ParsePack   = ParseCount(maxPack)
	ParseBatch  = ParseCount(maxBatch)
	ParseLayers = ParseCount(maxLayers)
	ParseHidden = ParseCount(maxHidden)
)

// quantized reports whether weights of this type are frozen storage that an
// optimizer cannot update in place.
func (d DType) quantized() bool { return d == INT8 || d == NF4 || d == NVFP4 }

// Complete checks the plan as a whole and fills in its defaults. Its errors
// are *FieldError, naming the field at fault.
func (p Plan) Complete() (Plan, error) {
	if !(p.Params >= minParams && p.Params <= maxParams) {
		return p, fieldErr("model-size", "must be between 1M and 10T parameters")
	}
	if _, err := ParseMethod(string(p.Method)); err != nil {
		return p, &FieldError{"method", err}
	}
	lora := p.Method == LoRA || p.Method == QLoRA
	switch {
	case p.DType == "" && p.Method == QLoRA:
		p.DType = NF4
	case p.DType == "":
		p.DType = BF16
	case p.Method == Full && p.DType.quantized():
		return p, fieldErr("dtype", "%s weights cannot be trained in place; full fine-tuning needs fp32, bf16 or fp16 (or use method qlora)", p.DType)
	case p.Method == QLoRA && p.DType != NF4:
		return p, fieldErr("dtype", "qlora quantizes the base to nf4; for %s weights use method lora", p.DType)
	case p.Method == LoRA && p.DType == NF4:
		return p, fieldErr("dtype", "LoRA on an nf4 base is qlora; use method qlora")
	}
	if _, err := ParseDType(string(p.DType)); err != nil {
		return p, &FieldError{"dtype", err}
	}
	if p.Optimizer == "" {
		p.Optimizer = DefaultOptimizer
	}
	if _, err := ParseOptimizer(string(p.Optimizer)); err != nil {
		return p, &FieldError{"optimizer", err}
	}
	switch {
	case !lora && p.LoRARank != 0:
		return p, fieldErr("lora-rank", "only applies to methods lora and qlora")
	case !lora && len(p.LoRATargets) > 0:
		return p, fieldErr("lora-targets", "only apply to methods lora and qlora")
	case lora && p.LoRARank == 0:
		p.LoRARank = DefaultRank
	}
	if p.LoRARank < 0 || p.LoRARank > maxRank {
		return p, fieldErr("lora-rank", "must be between 1 and %d", maxRank)
	}
	if p.Pack == 0 {
		p.Pack = DefaultPack
	}
	if p.Batch == 0 {
		p.Batch = DefaultBatch
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

// FormatParams writes a parameter count as docs/design.md does: 70B, 222M.
func FormatParams(n float64) string {
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
