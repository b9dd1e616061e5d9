package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/alecthomas/kingpin/v2"

	"github.com/spark-exporter/spark_exporter/internal/cliflag"
	"github.com/spark-exporter/spark_exporter/internal/hostfs"
	"github.com/spark-exporter/spark_exporter/internal/pool"
	"github.com/spark-exporter/spark_exporter/internal/uma"
)

// Exit statuses of the plan command, for launch scripts:
// `spark_exporter plan … && train`.
const (
	planFits    = 0 // ready or ready-with-warnings
	planBlocked = 1 // blocked, or the pool could not be read
	planUsage   = 2 // bad input, as for any usage error
)

// planCommand registers `spark_exporter plan` and its flags. It shares
// --path.procfs and --pool.reserve with the exporter, so that the headroom
// it checks against is the one the pool collector exports.
func planCommand(app *kingpin.Application, procfs *string) command {
	cmd := app.Command("plan", "Size a training run against the live unified memory pool before launch: "+
		"weights + optimizer + gradients + activations (+ adapters), and the load transient. "+
		"Exit status 0: ready or ready-with-warnings; 1: blocked; 2: bad input.")
	size := cliflag.Value(cmd.Flag("model-size", "Parameter count: 70B, 7.5B, 350M or 8e9.").Required().PlaceHolder("70B"), uma.ParseModelSize)
	method := cliflag.Value(cmd.Flag("method", "Training method: full, lora or qlora.").Required().PlaceHolder("qlora"), uma.ParseMethod)
	dtype := cliflag.Value(cmd.Flag("dtype", "Base weight type: fp32, bf16, fp16, int8, nf4, nvfp4 (default: nf4 for qlora, bf16 otherwise).").PlaceHolder("bf16"), uma.ParseDType)
	optimizer := cliflag.Value(cmd.Flag("optimizer", "Optimizer: adamw (fp32 states, 8 B per trainable parameter), adamw-8bit (≈2 B) or sgd (with momentum, 4 B) (default: adamw).").PlaceHolder("adamw"), uma.ParseOptimizer)
	rank := cliflag.Value(cmd.Flag("lora-rank", "LoRA rank, lora and qlora only (default: 16).").PlaceHolder("16"), uma.ParseRank)
	targets := cliflag.Value(cmd.Flag("lora-targets", "Adapted linear layers of one block as IN×OUT, comma-separated (4096x4096,4096x1024,…); needs --layers (default: the seven projections of a Llama block).").PlaceHolder("INxOUT,…"), uma.ParseShapes)
	checkpointing := cmd.Flag("gradient-checkpointing", "Gradient checkpointing is on (recompute activations in the backward pass).").Bool()
	pack := cliflag.Value(cmd.Flag("pack", "Packing (sequence) length in tokens.").Default(fmt.Sprint(uma.DefaultPack)), uma.ParsePack)
	batch := cliflag.Value(cmd.Flag("batch", "Sequences per step on the device.").Default(fmt.Sprint(uma.DefaultBatch)), uma.ParseBatch)
	layers := cliflag.Value(cmd.Flag("layers", "Transformer layers, with --hidden-size (default: derived from the size).").PlaceHolder("N"), uma.ParseLayers)
	hidden := cliflag.Value(cmd.Flag("hidden-size", "Hidden size, with --layers (default: derived from the size).").PlaceHolder("N"), uma.ParseHidden)
	asJSON := cmd.Flag("json", "Print the report as JSON (the preflight env-report.json shape plus the estimate).").Bool()

	return func(stdout, stderr io.Writer) int {
		p := uma.Plan{
			Params: *size, Method: *method, DType: *dtype, Optimizer: *optimizer,
			LoRARank: *rank, LoRATargets: *targets, GradientCheckpointing: *checkpointing,
			Pack: *pack, Batch: *batch, Layers: *layers, HiddenSize: *hidden,
		}
		reserve, ok := cliflag.Lookup[uint64](app.GetFlag("pool.reserve"))
		if !ok {
			fmt.Fprintf(stderr, "%s: error: --pool.reserve is not registered\n", name)
			return planBlocked
		}
		r, err := planReport(p, *procfs, reserve)
		var fe *uma.FieldError
		if errors.As(err, &fe) {
			fmt.Fprintf(stderr, "%s: error: invalid flag --%s: %v; try --help\n", name, fe.Field, fe.Err)
			return planUsage
		}
		if err != nil {
			fmt.Fprintf(stderr, "%s: error: %v\n", name, err)
			return planBlocked
		}
		if *asJSON {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			enc.SetEscapeHTML(false)
			err = enc.Encode(r.json())
		} else {
			err = r.writeTable(stdout)
		}
		if err != nil {
			fmt.Fprintf(stderr, "%s: error: %v\n", name, err)
			return planBlocked
		}
		if r.Verdict == uma.Blocked {
			return planBlocked
		}
		return planFits
	}
}

// report is a plan judged against the pool as read now.
type report struct {
	uma.Assessment
	Platform platform
	Pool     *pool.Snapshot // nil when meminfo could not be read
	Reserve  uint64
}

// platform is what /proc says about the machine; fields it does not give are
// left empty and omitted.
type platform struct {
	Arch   string
	Kernel string
}

// planReport reads the pool under procPath and assesses p against it.
func planReport(p uma.Plan, procPath string, reserve uint64) (report, error) {
	r := report{Reserve: reserve, Platform: readPlatform(procPath)}
	var budget *uma.Budget
	poolCheck := uma.Check{Name: "pool"}
	snap, err := pool.Read(procPath)
	if err != nil {
		poolCheck.Level, poolCheck.Detail = uma.Fail, "cannot read meminfo under --path.procfs: "+hostfs.WithoutPath(err).Error()
	} else {
		r.Pool = &snap
		budget = &uma.Budget{
			Headroom:   float64(snap.Headroom(reserve)),
			AfterFlush: float64(snap.HeadroomAfterFlush(reserve)),
		}
		poolCheck.Level, poolCheck.Detail = uma.Info, fmt.Sprintf("free %s GB, flushable %s GB, reserve %s GB",
			uma.FormatGB(float64(snap.Free)), uma.FormatGB(float64(snap.Flushable)), uma.FormatGB(float64(reserve)))
	}
	a, err := uma.Assess(p, budget)
	if err != nil {
		return report{}, err
	}
	r.Assessment = a
	r.Checks = append([]uma.Check{poolCheck}, r.Checks...)
	r.Verdict = uma.VerdictOf(r.Checks)
	return r, nil
}

// readPlatform reads the architecture and kernel release from procfs.
func readPlatform(procPath string) platform {
	read := func(name string) string {
		b, err := hostfs.New(procPath).ReadFile("sys/kernel/"+name, nil)
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	return platform{Arch: read("arch"), Kernel: read("osrelease")}
}
