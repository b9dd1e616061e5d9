package plan

import (
	"fmt"
	"math"
)

// Anchor is a run measured on one Spark
// (docs/design.md#anchors-measured-on-one-spark). A plan is compared with
// the nearest anchor of its method rather than trusted alone.
type Anchor struct {
	Name string
	// Plan is the anchor's run. Where the measurement gives no pack, batch or
	// optimizer, these are Unsloth's defaults on a Spark (pack 2048, batch 1,
	// adamw-8bit, checkpointing on); hence DefaultOptimizer, so that a plan
	// left to the defaults compares like with like.
	Plan Plan
	// Measured is the total measured, in bytes; 0 where the source says only
	// that the run fits, and the worksheet's figure stands in.
	Measured float64
	// Ceiling marks the largest class seen to fit with this method and
	// at least this many bytes per weight.
	Ceiling bool
	Note    string
}

// Anchors are the measured runs of docs/design.md.
var Anchors = []Anchor{
	{
		Name:     "70B QLoRA",
		Plan:     anchorPlan(70e9, QLoRA, NF4, 2048),
		Measured: 40 * GB,
		Note:     "≈40 GB measured",
	},
	{
		Name:     "~120B MoE NVFP4 LoRA",
		Plan:     anchorPlan(120e9, LoRA, NVFP4, 2048),
		Measured: 68 * GB,
		Note:     "≈68 GB measured, experimental",
	},
	{
		Name:    "27B LoRA at pack ≤1024",
		Plan:    anchorPlan(27e9, LoRA, BF16, 1024),
		Ceiling: true,
		Note:    "fits at pack ≤1024: the LoRA ceiling",
	},
	{
		Name:    "9B full fine-tune",
		Plan:    anchorPlan(9e9, Full, BF16, 2048),
		Ceiling: true,
		Note:    "fits comfortably: the full fine-tune ceiling",
	},
}

func anchorPlan(params float64, m Method, d DType, pack int) Plan {
	return Plan{Params: params, Method: m, DType: d, Optimizer: AdamW8bit, Pack: pack, Batch: 1, GradientCheckpointing: true}
}

// Reference is the anchor's total in bytes: measured, or the worksheet's.
func (a Anchor) Reference() float64 {
	if a.Measured > 0 {
		return a.Measured
	}
	e, err := a.Plan.Estimate()
	if err != nil {
		panic("anchor " + a.Name + ": " + err.Error()) // a bad table, caught by the tests
	}
	return e.Steady
}

// How close in size a plan must be to share an anchor's class, and how far
// above the anchor's total (scaled to the plan's size) counts as "far above".
const (
	classRatio = 2.0
	farAbove   = 1.5
)

// AnchorMatch is how a plan compares with the anchors.
type AnchorMatch struct {
	Nearest  Anchor
	InClass  bool    // within a factor of 2 in size of Nearest
	Expected float64 // Nearest's total scaled to the plan's size, bytes
	Check    Check
	// Ceiling is set when the plan is larger than its method's ceiling.
	Ceiling *Check
}

// CompareAnchors finds the nearest anchor of the estimate's method (by size
// ratio) and says whether the plan is in its class, far above it (re-check
// dtype and method: the worksheet's sanity test), or beyond a ceiling.
func CompareAnchors(e Estimate) AnchorMatch {
	p := e.Plan
	var m AnchorMatch
	best := math.Inf(1)
	for _, a := range Anchors {
		if a.Plan.Method != p.Method {
			continue
		}
		if d := math.Abs(math.Log(p.Params / a.Plan.Params)); d < best {
			best, m.Nearest = d, a
		}
	}
	a := m.Nearest
	m.InClass = best <= math.Log(classRatio)
	m.Expected = a.Reference() * p.Params / a.Plan.Params
	switch {
	case m.InClass && e.Steady > farAbove*m.Expected:
		m.Check = Check{"anchor", Warn, fmt.Sprintf(
			"steady state %s GB is far above the %s anchor (%s; ≈%s GB at this size): re-check dtype, method, optimizer and gradient checkpointing",
			gb(e.Steady), a.Name, a.Note, gb(m.Expected))}
	case m.InClass:
		m.Check = Check{"anchor", Info, fmt.Sprintf(
			"nearest anchor %s (%s; ≈%s GB at this size)", a.Name, a.Note, gb(m.Expected))}
	default:
		m.Check = Check{"anchor", Info, fmt.Sprintf(
			"no anchor in this size class; nearest is %s (%s): the four terms are the only guide, confirm with a short run",
			a.Name, a.Note)}
	}
	for _, c := range Anchors {
		if c.Ceiling && c.Plan.Method == p.Method &&
			bytesPerWeight[p.DType] >= bytesPerWeight[c.Plan.DType] &&
			p.Params > 1.1*c.Plan.Params {
			m.Ceiling = &Check{"ceiling", Warn, fmt.Sprintf(
				"%s is above the measured %s (%s): nothing larger was seen to fit with this method on one Spark",
				FormatParams(p.Params), c.Name, c.Note)}
		}
	}
	return m
}
