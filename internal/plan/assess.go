package plan

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spark-exporter/spark_exporter/internal/judge"
)

// Level is the outcome of one check, in the vocabulary of the
// env-report.json.
type Level string

const (
	Pass Level = "pass"
	Fail Level = "fail"
	Warn Level = "warn"
	Skip Level = "skip"
	Info Level = "info"
)

// Check is one line of the report.
type Check struct {
	Name   string
	Level  Level
	Detail string
}

// Value renders the check in env-report.json's vocabulary: a bare "pass" or
// "fail", or "warn: …", "skip: …", "info: …" with the detail.
func (c Check) Value() string {
	if c.Level == Pass || c.Level == Fail || c.Detail == "" {
		return string(c.Level)
	}
	return string(c.Level) + ": " + c.Detail
}

// String renders the check with its detail whatever its level, for people.
func (c Check) String() string {
	if c.Detail == "" {
		return string(c.Level)
	}
	return string(c.Level) + ": " + c.Detail
}

// Verdict is the report's conclusion.
type Verdict string

const (
	Ready             Verdict = "ready"
	ReadyWithWarnings Verdict = "ready-with-warnings"
	Blocked           Verdict = "blocked"
)

// VerdictOf is blocked if any check failed, ready-with-warnings if any
// warned, ready otherwise.
func VerdictOf(checks []Check) Verdict {
	v := Ready
	for _, c := range checks {
		switch c.Level {
		case Fail:
			return Blocked
		case Warn:
			v = ReadyWithWarnings
		}
	}
	return v
}

// Budget is what the pool can give a new run, in bytes; negative when free
// memory is already below the reserve.
type Budget struct {
	Headroom   float64 // free − reserve
	AfterFlush float64 // free + flushable page cache − reserve: OOM ladder step 1
}

// spare: a plan should leave judge.PlanSpareRatio above its peak, and fit
// with its activation term doubled (the term is good to about a factor of 2).
const spare = judge.PlanSpareRatio

// Assessment is a plan judged against a budget.
type Assessment struct {
	Estimate Estimate
	Anchor   AnchorMatch
	Checks   []Check
	Verdict  Verdict
	// Next is the step of the OOM ladder that would make the plan fit (or
	// fit with margin); empty when none is needed.
	Next string
}

// Add appends a check and updates the verdict.
func (a *Assessment) Add(c Check) {
	a.Checks = append(a.Checks, c)
	a.Verdict = VerdictOf(a.Checks)
}

// Assess sizes the plan and judges it against the budget; a nil budget (the
// pool could not be read) skips the checks that need it.
func Assess(p Plan, b *Budget) (Assessment, error) {
	e, err := p.Estimate()
	if err != nil {
		return Assessment{}, err
	}
	a := Assessment{Estimate: e, Anchor: CompareAnchors(e)}
	a.Checks = append(a.Checks, fitChecks(e, b)...)
	a.Checks = append(a.Checks, a.Anchor.Check)
	if a.Anchor.Ceiling != nil {
		a.Checks = append(a.Checks, *a.Anchor.Ceiling)
	}
	a.Checks = append(a.Checks, architectureCheck(e), activationsCheck(e))
	if e.Plan.Method == QLoRA {
		a.Checks = append(a.Checks, Check{"method", Info,
			"QLoRA's dequantization buffers are transient CUDA allocations outside this estimate; a QLoRA OOM is not proof the model cannot fit (try bf16 LoRA)"})
	}
	a.Verdict = VerdictOf(a.Checks)
	if b != nil {
		a.Next = nextStep(e, *b)
	}
	return a, nil
}

// fits is whether e's peak fits within budget bytes, flushed or not.
func fits(e Estimate, budget float64) bool { return judge.FitOf(e.Peak, budget, budget) == judge.Fits }

// fitsWithMargin is whether e fits with the margin a plan should leave.
func fitsWithMargin(e Estimate, budget float64) bool {
	return judge.FitsWithMargin(e.Peak, max(e.Steady+e.Activations, e.Load), budget)
}

func fitChecks(e Estimate, b *Budget) []Check {
	if b == nil {
		return []Check{
			{"fit", Skip, "pool not read"},
			{"margin", Skip, "pool not read"},
		}
	}
	var fit Check
	budget := b.Headroom
	switch {
	case fits(e, b.Headroom):
		fit = Check{"fit", Pass, fmt.Sprintf("peak %s GB within headroom %s GB", gb(e.Peak), gb(b.Headroom))}
	case fits(e, b.AfterFlush):
		budget = b.AfterFlush
		fit = Check{"fit", Warn, fmt.Sprintf(
			"peak %s GB fits only after flushing the page cache (headroom %s GB, %s GB after a flush)",
			gb(e.Peak), gb(b.Headroom), gb(b.AfterFlush))}
	default:
		detail := fmt.Sprintf("peak %s GB exceeds the headroom after a flush, %s GB", gb(e.Peak), gb(b.AfterFlush))
		if e.Load > e.Steady && e.Steady <= b.AfterFlush {
			detail += fmt.Sprintf("; the steady state (%s GB) would fit, the load transient (%s GB) does not", gb(e.Steady), gb(e.Load))
		}
		return []Check{{"fit", Fail, detail}, {"margin", Skip, "does not fit"}}
	}
	if fitsWithMargin(e, budget) {
		return []Check{fit, {"margin", Pass, ""}}
	}
	var why []string
	if e.Peak*(1+spare) > budget {
		why = append(why, fmt.Sprintf("less than %d%% to spare", int(spare*100)))
	}
	if max(e.Steady+e.Activations, e.Load) > budget {
		why = append(why, fmt.Sprintf("would not fit with the activation term doubled (%s GB)", gb(2*e.Activations)))
	}
	return []Check{fit, {"margin", Warn, strings.Join(why, "; ")}}
}

func architectureCheck(e Estimate) Check {
	shape := fmt.Sprintf("%d layers × %d hidden", e.Layers, e.HiddenSize)
	if e.Derived {
		return Check{"architecture", Info, shape + ", derived from the size for a dense Llama-style model; give layers and hidden size for a better activation figure (MoE models especially)"}
	}
	if dense := DenseParams(e.Layers, e.HiddenSize); dense > 2*e.Plan.Params {
		return Check{"architecture", Warn, fmt.Sprintf(
			"%s describe a ~%s dense model, more than the %s given: check layers, hidden size and model size",
			shape, FormatParams(dense), FormatParams(e.Plan.Params))}
	}
	return Check{"architecture", Info, shape + ", given"}
}

func activationsCheck(e Estimate) Check {
	how := "34·layers·hidden bytes per token, no checkpointing"
	if e.Plan.GradientCheckpointing {
		how = "(2·layers + 34)·hidden bytes per token, checkpointed"
	}
	return Check{"activations", Info, fmt.Sprintf(
		"%s GB for %d tokens per step at %s (16-bit, flash attention): good to about a factor of 2",
		gb(e.Activations), e.Plan.Pack*e.Plan.Batch, how)}
}

// minPack is as far as the ladder cuts packing length before it turns to the
// batch size: shorter windows change what the model learns more than a
// smaller batch, which gradient accumulation can make up.
const minPack = 512

// shrinks lists the step-2 variants of p in the OOM ladder's order
// (docs/design.md#the-oom-ladder): packing length halved down to minPack,
// then batch size halved to 1.
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

// stepDown is the next method down the ladder (bf16 LoRA before QLoRA), or
// false at the bottom.
func stepDown(p Plan) (Plan, bool) {
	switch p.Method {
	case Full:
		p.Method, p.DType = LoRA, BF16
	case LoRA:
		if p.DType == NVFP4 { // already 4-bit: QLoRA would save nothing
			return p, false
		}
		p.Method, p.DType = QLoRA, NF4
	default:
		return p, false
	}
	p.LoRARank, p.LoRATargets = 0, nil
	return p, true
}

// nextStep walks the OOM ladder in order, never skipping: (1) flush the page
// cache, (2) cut packing length, then batch size, (3) step the method down.
// It returns the first step after which the plan fits. For a plan that fits
// without margin only steps 1 and 2 are offered: a plan close to the budget
// should not change its method.
func nextStep(e Estimate, b Budget) string {
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

// ladder tries step 2 and, if methods is set, step 3, and describes the
// first variant of p that ok accepts, or returns "".
func ladder(p Plan, ok func(Estimate) bool, b Budget, methods bool) string {
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

func gb(bytes float64) string { return strconv.FormatFloat(bytes/GB, 'f', 2, 64) }

// FormatGB writes bytes as GB with two decimals, as every message here does.
func FormatGB(bytes float64) string { return gb(bytes) }

// GBRounded is bytes in GB rounded to two decimals, for reports.
func GBRounded(bytes float64) float64 {
	v, _ := strconv.ParseFloat(gb(bytes), 64)
	return v
}
