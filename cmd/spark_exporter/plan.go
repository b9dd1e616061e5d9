package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/alecthomas/kingpin/v2"

	"github.com/spark-exporter/spark_exporter/collector"
	"github.com/spark-exporter/spark_exporter/internal/cliflag"
	"github.com/spark-exporter/spark_exporter/internal/hostfs"
	"github.com/spark-exporter/spark_exporter/internal/plan"
	"github.com/spark-exporter/spark_exporter/internal/pool"
)

// For launch scripts: `spark_exporter plan … && train`.
const (
	planFits    = 0 // ready or ready-with-warnings
	planBlocked = 1 // blocked, or the pool could not be read
	planUsage   = 2 // bad input, as for any usage error
)

// planCommand takes --pool.reserve to check against the headroom the exporter exports.
func planCommand(app *kingpin.Application, procfs *string) command {
	cmd := app.Command("plan", "Size a training run against the live unified memory pool before launch: "+
		"weights + optimizer + gradients + activations (+ adapters), and the load transient. "+
		"Exit status 0: ready or ready-with-warnings; 1: blocked; 2: bad input.")
	p := planFlags(cmd)
	poolFlags := collector.AddPoolFlags(cmd)
	asJSON := cmd.Flag("json", "Print the answer as JSON (the preflight env-report.json shape plus the estimate).").Bool()

	return func(stdout, stderr io.Writer) int {
		snap, readErr := pool.Read(*procfs)
		r, err := plan.NewAnswer(*p, snap, readErr, poolFlags.Reserve(), readPlatform(*procfs))
		var fe *plan.FieldError
		if errors.As(err, &fe) {
			fmt.Fprintf(stderr, "%s: error: invalid flag --%s: %v; try --help\n", name, fe.Field, fe.Err)
			return planUsage
		}
		if err != nil {
			fmt.Fprintf(stderr, "%s: error: %v\n", name, err)
			return planBlocked
		}
		if *asJSON {
			err = r.WriteJSON(stdout)
		} else {
			err = r.WriteText(stdout)
		}
		if err != nil {
			fmt.Fprintf(stderr, "%s: error: %v\n", name, err)
			return planBlocked
		}
		if r.Verdict == plan.Blocked {
			return planBlocked
		}
		return planFits
	}
}

func planFlags(cmd *kingpin.CmdClause) *plan.Plan {
	p := new(plan.Plan)
	for _, f := range plan.Fields {
		fc := cmd.Flag(f.Name, f.Help)
		if f.Required {
			fc.Required()
		}
		if f.PlaceHolder != "" {
			fc.PlaceHolder(f.PlaceHolder)
		}
		if f.Default != "" {
			fc.Default(f.Default)
		}
		set := func(s string) error { return f.Set(p, s) }
		if f.Switch {
			fc.SetValue(&switchFlag{set: set})
			continue
		}
		// cliflag refuses a bad value naming the flag; the plan keeps it.
		cliflag.Value(fc, func(s string) (struct{}, error) { return struct{}{}, set(s) })
	}
	return p
}

type switchFlag struct {
	set  func(string) error
	text string
}

func (v *switchFlag) Set(s string) error {
	if err := v.set(s); err != nil {
		return err
	}
	v.text = s
	return nil
}

func (v *switchFlag) String() string   { return v.text }
func (v *switchFlag) IsBoolFlag() bool { return true }

func readPlatform(procPath string) plan.Platform {
	read := func(name string) string {
		b, err := hostfs.New(procPath).ReadFile("sys/kernel/"+name, nil)
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	return plan.Platform{Arch: read("arch"), Kernel: read("osrelease")}
}
