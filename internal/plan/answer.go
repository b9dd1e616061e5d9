package plan

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spark-exporter/spark_exporter/internal/pool"
	"github.com/spark-exporter/spark_exporter/internal/redact"
)

// Answer is the plan command's answer: the assessment of a plan against this pool and platform.
type Answer struct {
	Assessment
	Platform Platform
	Pool     *pool.Snapshot // nil when meminfo could not be read
	Reserve  uint64
}

// Platform is what /proc says about the machine; "" where it says nothing.
type Platform struct {
	Arch   string
	Kernel string
}

// NewAnswer assesses p against snap, or readErr; reserve is kept back from
// the headroom as the pool collector does. Its errors are *FieldError.
func NewAnswer(p Plan, snap pool.Snapshot, readErr error, reserve uint64, platform Platform) (Answer, error) {
	r := Answer{Reserve: reserve, Platform: platform}
	var budget *poolBudget
	poolCheck := Check{Name: "pool"}
	if readErr != nil {
		poolCheck.Level, poolCheck.Detail = levelFail, "cannot read meminfo under --path.procfs: "+redact.WithoutPath(readErr).Error()
	} else {
		r.Pool = &snap
		budget = &poolBudget{
			Headroom:   float64(snap.Headroom(reserve)),
			AfterFlush: float64(snap.HeadroomAfterFlush(reserve)),
		}
		poolCheck.Level, poolCheck.Detail = levelInfo, fmt.Sprintf("free %s GB, flushable %s GB, reserve %s GB",
			gb(float64(snap.Free)), gb(float64(snap.Flushable)), gb(float64(reserve)))
		if snap.CMA != nil && snap.CMA.Free > 0 {
			poolCheck.Detail += fmt.Sprintf(", of the free %s GB CMA, which a job's pinned memory cannot use", gb(float64(snap.CMA.Free)))
		}
	}
	a, err := assessPlan(p, budget)
	if err != nil {
		return Answer{}, err
	}
	r.Assessment = a
	r.Checks = append([]Check{poolCheck}, r.Checks...)
	r.Verdict = verdictOf(r.Checks)
	return r, nil
}

func (r Answer) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(r.json())
}

// answerJSON is docs/design.md's env-report.json; what the pool did not give is left out.
type answerJSON struct {
	Platform             platformJSON      `json:"platform"`
	Pool                 poolJSON          `json:"pool"`
	Checks               map[string]string `json:"checks"`
	Details              map[string]string `json:"details,omitempty"`
	HeadroomGB           *float64          `json:"headroom_gb,omitempty"`
	HeadroomAfterFlushGB *float64          `json:"headroom_after_flush_gb,omitempty"`
	Verdict              Verdict           `json:"verdict"`
	NextStep             string            `json:"next_step,omitempty"`
	Anchor               string            `json:"anchor"`
	Estimate             estimateJSON      `json:"estimate"`
}

type platformJSON struct {
	Arch          string   `json:"arch,omitempty"`
	Kernel        string   `json:"kernel,omitempty"`
	MemoryTotalGB *float64 `json:"memory_total_gb,omitempty"`
}

type poolJSON struct {
	FreeGB      *float64 `json:"free_gb,omitempty"`
	FlushableGB *float64 `json:"flushable_gb,omitempty"`
	ReserveGB   float64  `json:"reserve_gb"`
}

type estimateJSON struct {
	Params                float64   `json:"params"`
	Method                Method    `json:"method"`
	DType                 DType     `json:"dtype"`
	Optimizer             Optimizer `json:"optimizer"`
	LoRARank              int       `json:"lora_rank,omitempty"`
	Pack                  int       `json:"pack"`
	Batch                 int       `json:"batch"`
	GradientCheckpointing bool      `json:"gradient_checkpointing"`
	Layers                int       `json:"layers"`
	HiddenSize            int       `json:"hidden_size"`
	ArchitectureDerived   bool      `json:"architecture_derived"`
	TrainableParams       float64   `json:"trainable_params"`
	WeightsGB             float64   `json:"weights_gb"`
	OptimizerGB           float64   `json:"optimizer_gb"`
	GradientsGB           float64   `json:"gradients_gb"`
	AdaptersGB            float64   `json:"adapters_gb"`
	ActivationsGB         float64   `json:"activations_gb"`
	SteadyGB              float64   `json:"steady_gb"`
	LoadGB                float64   `json:"load_gb"`
	PeakGB                float64   `json:"peak_gb"`
}

func gbPtr(bytes float64) *float64 {
	v := gbRounded(bytes)
	return &v
}

func (r Answer) json() answerJSON {
	e := r.Estimate
	out := answerJSON{
		Platform: platformJSON{Arch: r.Platform.Arch, Kernel: r.Platform.Kernel},
		Pool:     poolJSON{ReserveGB: gbRounded(float64(r.Reserve))},
		Checks:   map[string]string{},
		Details:  map[string]string{},
		Verdict:  r.Verdict,
		NextStep: r.Next,
		Anchor:   r.Anchor.Nearest.Name,
		Estimate: estimateJSON{
			Params: e.Plan.Params, Method: e.Plan.Method, DType: e.Plan.DType, Optimizer: e.Plan.Optimizer,
			LoRARank: e.Plan.LoRARank, Pack: e.Plan.Pack, Batch: e.Plan.Batch,
			GradientCheckpointing: e.Plan.GradientCheckpointing,
			Layers:                e.Layers, HiddenSize: e.HiddenSize, ArchitectureDerived: e.Derived,
			TrainableParams: e.TrainableParams,
			WeightsGB:       gbRounded(e.Weights), OptimizerGB: gbRounded(e.Optimizer),
			GradientsGB: gbRounded(e.Gradients), AdaptersGB: gbRounded(e.Adapters),
			ActivationsGB: gbRounded(e.Activations), SteadyGB: gbRounded(e.Steady),
			LoadGB: gbRounded(e.Load), PeakGB: gbRounded(e.Peak),
		},
	}
	for _, c := range r.Checks {
		out.Checks[c.Name] = c.value()
		if (c.Level == levelPass || c.Level == levelFail) && c.Detail != "" {
			out.Details[c.Name] = c.Detail
		}
	}
	if s := r.Pool; s != nil {
		out.Platform.MemoryTotalGB = gbPtr(float64(s.Total))
		out.Pool.FreeGB = gbPtr(float64(s.Free))
		out.Pool.FlushableGB = gbPtr(float64(s.Flushable))
		out.HeadroomGB = gbPtr(float64(s.Headroom(r.Reserve)))
		out.HeadroomAfterFlushGB = gbPtr(float64(s.HeadroomAfterFlush(r.Reserve)))
	}
	return out
}

func num(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func (r Answer) WriteText(w io.Writer) error {
	e := r.Estimate
	p := e.Plan
	var b strings.Builder

	desc := []string{fmt.Sprintf("%s %s (%s weights)", formatParams(p.Params), p.Method, p.DType), string(p.Optimizer)}
	if p.Method != methodFull {
		desc = append(desc, "LoRA rank "+strconv.Itoa(p.LoRARank))
	}
	desc = append(desc, fmt.Sprintf("pack %d × batch %d", p.Pack, p.Batch))
	if p.GradientCheckpointing {
		desc = append(desc, "gradient checkpointing")
	} else {
		desc = append(desc, "no gradient checkpointing")
	}
	fmt.Fprintf(&b, "plan: %s\n\n", strings.Join(desc, ", "))

	row := func(label string, bytes float64, how string) {
		fmt.Fprintf(&b, "%-12s %8s  %s\n", label, gb(bytes), how)
	}
	trainable := formatParams(e.TrainableParams)
	fmt.Fprintf(&b, "%-12s %8s\n", "ESTIMATE", "GB")
	row("weights", e.Weights, fmt.Sprintf("%s × %s B (%s)", formatParams(p.Params), num(e.Weights/p.Params), p.DType))
	if p.Method != methodFull {
		row("adapters", e.Adapters, fmt.Sprintf("%s × %s B", formatParams(e.AdapterParams), num(e.Adapters/e.AdapterParams)))
	} else {
		row("adapters", 0, "none: full fine-tune")
	}
	row("optimizer", e.Optimizer, fmt.Sprintf("%s trainable × %s B (%s)", trainable, num(e.Optimizer/e.TrainableParams), p.Optimizer))
	row("gradients", e.Gradients, fmt.Sprintf("%s trainable × %s B", trainable, num(e.Gradients/e.TrainableParams)))
	shape := fmt.Sprintf("%d layers × %d hidden", e.Layers, e.HiddenSize)
	if e.Derived {
		shape += " (derived)"
	}
	row("activations", e.Activations, fmt.Sprintf("%d tokens, %s; ×½ to ×2", p.Pack*p.Batch, shape))
	row("steady", e.Steady, "resident while training")
	row("load", e.Load, "weights twice: mmap'd file + CUDA copy")
	row("peak", e.Peak, "what the pool must take")

	fmt.Fprintf(&b, "\n%-12s %8s\n", "POOL", "GB")
	if s := r.Pool; s != nil {
		row("free", float64(s.Free), "MemFree: free(1)'s free column")
		headroom, afterFlush := "free − reserve", "free + flushable − reserve"
		if s.CMA != nil && s.CMA.Free > 0 {
			row("CMA free", float64(s.CMA.Free), "CmaFree: free, yet not for a job's pinned memory")
			headroom, afterFlush = "free − CMA free − reserve", "free − CMA free + flushable − reserve"
		}
		row("flushable", float64(s.Flushable), "page cache a flush gives back")
		row("reserve", float64(r.Reserve), "--pool.reserve")
		row("headroom", float64(s.Headroom(r.Reserve)), headroom)
		row("after flush", float64(s.HeadroomAfterFlush(r.Reserve)), afterFlush)
	} else {
		b.WriteString("unreadable\n")
	}

	b.WriteString("\n")
	cw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(cw, "CHECK\tRESULT\n")
	for _, c := range r.Checks {
		fmt.Fprintf(cw, "%s\t%s\n", c.Name, c)
	}
	if err := cw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(&b, "\nverdict: %s\n", r.Verdict)
	if r.Next != "" {
		fmt.Fprintf(&b, "next: %s\n", r.Next)
	}
	_, err := io.WriteString(w, b.String())
	return err
}
