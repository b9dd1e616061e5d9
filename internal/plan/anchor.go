package plan

import (
	"fmt"
	"math"
)

// Anchor is a run measured on one Spark (docs/design.md#anchors-measured-on-one-spark).
type Anchor struct {
	Name     string
	Plan     Plan    // unstated pack, batch, optimizer: Unsloth's defaults on a Spark
	Measured float64 // bytes; 0 where the source says only that it fits
	Ceiling  bool    // the largest class seen to fit with this method and dtype size
	Note     string
}

var anchors = []Anchor{
	{
		Name:     "70B QLoRA",
		Plan:     anchorPlan(70e9, methodQLoRA, dtypeNF4, 2048),
		Measured: 40 * bytesPerGB,
		Note:     "≈40 GB measured",
	},
	{
		Name:     "~120B MoE NVFP4 LoRA",
		Plan:     anchorPlan(120e9, methodLoRA, dtypeNVFP4, 2048),
		Measured: 68 * bytesPerGB,
		Note:     "≈68 GB measured, experimental",
	},
	{
		Name:    "27B LoRA at pack ≤1024",
		Plan:    anchorPlan(27e9, methodLoRA, dtypeBF16, 1024),
		Ceiling: true,
		Note:    "fits at pack ≤1024: the LoRA ceiling",
	},
	{
		Name:    "9B full fine-tune",
		Plan:    anchorPlan(9e9, methodFull, dtypeBF16, 2048),
		Ceiling: true,
		Note:    "fits comfortably: the full fine-tune ceiling",
	},
}

func anchorPlan(params float64, m Method, d DType, pack int) Plan {
	return Plan{Params: params, Method: m, DType: d, Optimizer: optAdamW8bit, Pack: pack, Batch: 1, GradientCheckpointing: true}
}

// reference is the anchor's total in bytes: measured, or the worksheet's.
func (a Anchor) reference() float64 {
	if a.Measured > 0 {
		return a.Measured
	}
	e, err := a.Plan.Estimate()
	if err != nil {
		panic("anchor " + a.Name + ": " + err.Error()) // a bad table, caught by the tests
	}
	return e.Steady
}

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
	Ceiling  *Check // set when the plan is above its method's ceiling
}

// compareAnchors finds the nearest anchor of e's method by size ratio.
func compareAnchors(e Estimate) AnchorMatch {
	p := e.Plan
	var m AnchorMatch
	best := math.Inf(1)
	for _, a := range anchors {
		if a.Plan.Method != p.Method {
			continue
		}
		if d := math.Abs(math.Log(p.Params / a.Plan.Params)); d < best {
			best, m.Nearest = d, a
		}
	}
	a := m.Nearest
	m.InClass = best <= math.Log(classRatio)
	m.Expected = a.reference() * p.Params / a.Plan.Params
	switch {
	case m.InClass && e.Steady > farAbove*m.Expected:
		m.Check = Check{"anchor", levelWarn, fmt.Sprintf(
			"steady state %s GB is far above the %s anchor (%s; ≈%s GB at this size): re-check dtype, method, optimizer and gradient checkpointing",
			gb(e.Steady), a.Name, a.Note, gb(m.Expected))}
	case m.InClass:
		m.Check = Check{"anchor", levelInfo, fmt.Sprintf(
			"nearest anchor %s (%s; ≈%s GB at this size)", a.Name, a.Note, gb(m.Expected))}
	default:
		m.Check = Check{"anchor", levelInfo, fmt.Sprintf(
			"no anchor in this size class; nearest is %s (%s): the four terms are the only guide, confirm with a short run",
			a.Name, a.Note)}
	}
	for _, c := range anchors {
		if c.Ceiling && c.Plan.Method == p.Method &&
			bytesPerWeight[p.DType] >= bytesPerWeight[c.Plan.DType] &&
			p.Params > 1.1*c.Plan.Params {
			m.Ceiling = &Check{"ceiling", levelWarn, fmt.Sprintf(
				"%s is above the measured %s (%s): nothing larger was seen to fit with this method on one Spark",
				formatParams(p.Params), c.Name, c.Note)}
		}
	}
	return m
}
