package plan

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spark-exporter/spark_exporter/internal/judge"
)

// Level is the outcome of one check, in env-report.json's words.
type Level string

const (
	levelPass Level = "pass"
	levelFail Level = "fail"
	levelWarn Level = "warn"
	levelSkip Level = "skip"
	levelInfo Level = "info"
)

// Check is one line of the answer.
type Check struct {
	Name   string
	Level  Level
	Detail string
}

// value is env-report.json's form: a bare "pass" or "fail", "warn: …" otherwise.
func (c Check) value() string {
	if c.Level == levelPass || c.Level == levelFail || c.Detail == "" {
		return string(c.Level)
	}
	return string(c.Level) + ": " + c.Detail
}

// String renders the check with its detail whatever its level.
func (c Check) String() string {
	if c.Detail == "" {
		return string(c.Level)
	}
	return string(c.Level) + ": " + c.Detail
}

// Verdict is the answer's conclusion.
type Verdict string

const (
	verdictReady             Verdict = "ready"
	verdictReadyWithWarnings Verdict = "ready-with-warnings"
	Blocked                  Verdict = "blocked"
)

func verdictOf(checks []Check) Verdict {
	v := verdictReady
	for _, c := range checks {
		switch c.Level {
		case levelFail:
			return Blocked
		case levelWarn:
			v = verdictReadyWithWarnings
		}
	}
	return v
}

// poolBudget is what the pool can give a new run, in bytes; negative below the reserve.
type poolBudget struct {
	Headroom   float64 // free − reserve
	AfterFlush float64 // free + flushable page cache − reserve: OOM ladder step 1
}

// The activation term is good to about a factor of 2, so a plan should also
// fit with it doubled.
const spare = judge.PlanSpareRatio

// Assessment is a plan judged against a budget.
type Assessment struct {
	Estimate Estimate
	Anchor   AnchorMatch
	Checks   []Check
	Verdict  Verdict
	Next     string // the OOM ladder's step that makes it fit; "" when none is needed
}

// assessPlan judges p against b; a nil b (pool unread) skips the checks that need it.
func assessPlan(p Plan, b *poolBudget) (Assessment, error) {
	e, err := p.Estimate()
	if err != nil {
		return Assessment{}, err
	}
	a := Assessment{Estimate: e, Anchor: compareAnchors(e)}
	a.Checks = append(a.Checks, fitChecks(e, b)...)
	a.Checks = append(a.Checks, a.Anchor.Check)
	if a.Anchor.Ceiling != nil {
		a.Checks = append(a.Checks, *a.Anchor.Ceiling)
	}
	a.Checks = append(a.Checks, architectureCheck(e), activationsCheck(e))
	if e.Plan.Method == methodQLoRA {
		a.Checks = append(a.Checks, Check{"method", levelInfo,
			"QLoRA's dequantization buffers are transient CUDA allocations outside this estimate; a QLoRA OOM is not proof the model cannot fit (try bf16 LoRA)"})
	}
	a.Verdict = verdictOf(a.Checks)
	if b != nil {
		a.Next = nextStep(e, *b)
	}
	return a, nil
}

func fits(e Estimate, budget float64) bool { return judge.FitOf(e.Peak, budget, budget) == judge.Fits }

func fitsWithMargin(e Estimate, budget float64) bool {
	return judge.FitsWithMargin(e.Peak, max(e.Steady+e.Activations, e.Load), budget)
}

func fitChecks(e Estimate, b *poolBudget) []Check {
	if b == nil {
		return []Check{
			{"fit", levelSkip, "pool not read"},
			{"margin", levelSkip, "pool not read"},
		}
	}
	var fit Check
	budget := b.Headroom
	switch {
	case fits(e, b.Headroom):
		fit = Check{"fit", levelPass, fmt.Sprintf("peak %s GB within headroom %s GB", gb(e.Peak), gb(b.Headroom))}
	case fits(e, b.AfterFlush):
		budget = b.AfterFlush
		fit = Check{"fit", levelWarn, fmt.Sprintf(
			"peak %s GB fits only after flushing the page cache (headroom %s GB, %s GB after a flush)",
			gb(e.Peak), gb(b.Headroom), gb(b.AfterFlush))}
	default:
		detail := fmt.Sprintf("peak %s GB exceeds the headroom after a flush, %s GB", gb(e.Peak), gb(b.AfterFlush))
		if e.Load > e.Steady && e.Steady <= b.AfterFlush {
			detail += fmt.Sprintf("; the steady state (%s GB) would fit, the load transient (%s GB) does not", gb(e.Steady), gb(e.Load))
		}
		return []Check{{"fit", levelFail, detail}, {"margin", levelSkip, "does not fit"}}
	}
	if fitsWithMargin(e, budget) {
		return []Check{fit, {"margin", levelPass, ""}}
	}
	var why []string
	if e.Peak*(1+spare) > budget {
		why = append(why, fmt.Sprintf("less than %d%% to spare", int(spare*100)))
	}
	if max(e.Steady+e.Activations, e.Load) > budget {
		why = append(why, fmt.Sprintf("would not fit with the activation term doubled (%s GB)", gb(2*e.Activations)))
	}
	return []Check{fit, {"margin", levelWarn, strings.Join(why, "; ")}}
}

func architectureCheck(e Estimate) Check {
	shape := fmt.Sprintf("%d layers × %d hidden", e.Layers, e.HiddenSize)
	if e.Derived {
		return Check{"architecture", levelInfo, shape + ", derived from the size for a dense Llama-style model; give layers and hidden size for a better activation figure (MoE models especially)"}
	}
	if dense := denseParams(e.Layers, e.HiddenSize); dense > 2*e.Plan.Params {
		return Check{"architecture", levelWarn, fmt.Sprintf(
			"%s describe a ~%s dense model, more than the %s given: check layers, hidden size and model size",
			shape, formatParams(dense), formatParams(e.Plan.Params))}
	}
	return Check{"architecture", levelInfo, shape + ", given"}
}

func activationsCheck(e Estimate) Check {
	how := "34·layers·hidden bytes per token, no checkpointing"
	if e.Plan.GradientCheckpointing {
		how = "(2·layers + 34)·hidden bytes per token, checkpointed"
	}
	return Check{"activations", levelInfo, fmt.Sprintf(
		"%s GB for %d tokens per step at %s (16-bit, flash attention): good to about a factor of 2",
		gb(e.Activations), e.Plan.Pack*e.Plan.Batch, how)}
}

// minPack: below it the ladder cuts the batch instead, which gradient
// accumulation makes up; shorter windows change what the model learns.
const minPack = 512

// shrinks lists step 2 of the OOM ladder (docs/design.md#the-oom-ladder) in order.
func shrinks(p Plan) []Plan {
	var out []Plan
	for p.Pack/2 >= minPack {
		p.Pack /= 2
		out = append(out, p)
	}
	for p.Batch > 1 {
		p.Batch /= 2
		out = append(out, p)
	}
	return out
}

// stepDown goes to bf16 LoRA before QLoRA; false at the bottom.
func stepDown(p Plan) (Plan, bool) {
	switch p.Method {
	case methodFull:
		p.Method, p.DType = methodLoRA, dtypeBF16
	case methodLoRA:
		if p.DType == dtypeNVFP4 { // already 4-bit: QLoRA would save nothing
			return p, false
		}
		p.Method, p.DType = methodQLoRA, dtypeNF4
	default:
		return p, false
	}
	p.LoRARank, p.LoRATargets = 0, nil
	return p, true
}

// nextStep returns the first step of the OOM ladder after which the plan
// fits. A plan that fits without margin is offered steps 1 and 2 only: it
// should not change its method.
func nextStep(e Estimate, b poolBudget) string {
	const flush = "flush the page cache (sync; echo 3 > /proc/sys/vm/drop_caches, as root, between runs)"
	switch {
	case fitsWithMargin(e, b.Headroom):
		return ""
	case fits(e, b.Headroom):
		if fitsWithMargin(e, b.AfterFlush) {
			return "for margin, OOM ladder step 1: " + flush
		}
		if s := ladder(e.Plan, func(x Estimate) bool { return fitsWithMargin(x, b.AfterFlush) }, b, false); s != "" {
			return "for margin, " + s
		}
		return ""
	case fits(e, b.AfterFlush):
		return "OOM ladder step 1: " + flush
	}
	if s := ladder(e.Plan, func(x Estimate) bool { return fits(x, b.AfterFlush) }, b, true); s != "" {
		return s
	}
	return "no step of the OOM ladder fits this pool: free what other workloads hold, or take a smaller model or several Sparks"
}

// ladder describes the first variant of p that ok accepts, trying step 3 only with methods.
func ladder(p Plan, ok func(Estimate) bool, b poolBudget, methods bool) string {
	try := func(q Plan) (Estimate, bool) {
		x, err := q.Estimate()
		return x, err == nil && ok(x)
	}
	describe := func(step int, q Plan, x Estimate) string {
		var changes []string
		if q.Method != p.Method {
			changes = append(changes, "step the method down to --method="+string(q.Method)+" --dtype="+string(q.DType))
		}
		if q.Pack != p.Pack {
			changes = append(changes, "cut --pack to "+strconv.Itoa(q.Pack))
		}
		if q.Batch != p.Batch {
			changes = append(changes, "cut --batch to "+strconv.Itoa(q.Batch))
		}
		s := fmt.Sprintf("OOM ladder step %d: %s (peak %s GB)", step, strings.Join(changes, ", "), gb(x.Peak))
		if x.Peak > b.Headroom {
			s += ", after flushing the page cache (step 1)"
		}
		return s
	}
	for _, q := range shrinks(p) {
		if x, fit := try(q); fit {
			return describe(2, q, x)
		}
	}
	if !methods {
		return ""
	}
	for q, more := stepDown(p); more; q, more = stepDown(q) {
		for _, v := range append([]Plan{q}, shrinks(q)...) {
			if x, fit := try(v); fit {
				return describe(3, v, x)
			}
		}
	}
	return ""
}

func gb(bytes float64) string { return strconv.FormatFloat(bytes/bytesPerGB, 'f', 2, 64) }

func gbRounded(bytes float64) float64 {
	v, _ := strconv.ParseFloat(gb(bytes), 64)
	return v
}
