// Command spark_exporter is a Prometheus exporter for the NVIDIA DGX Spark (GB10).
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/version"

	"github.com/spark-exporter/spark_exporter/internal/cliflag"
	"github.com/spark-exporter/spark_exporter/internal/hostfs"
)

const name = "spark_exporter"

// defaultPort is outside 9100-9999, which the Prometheus wiki's list of
// exporter ports has filled, and clear of the Kubernetes node ports
// (10248-10259) that may share the host. 10240: the GB10's 240 W rating.
const defaultPort = ":10240"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

type command func(stdout, stderr io.Writer) int

// run returns 2 for bad flags, as for any usage error.
func run(args []string, stdout, stderr io.Writer) (status int) {
	app, commands := newApp()
	app.UsageWriter(stdout)
	app.ErrorWriter(stderr)
	// --help and --version end the program through Terminate; turn that
	// into a return so that run can be called from tests.
	type exit int
	app.Terminate(func(code int) { panic(exit(code)) })
	defer func() {
		if r := recover(); r != nil {
			code, ok := r.(exit)
			if !ok {
				panic(r)
			}
			status = int(code)
		}
	}()

	selected, err := parse(app, args)
	if err != nil {
		fmt.Fprintf(stderr, "%s: error: %v; try --help\n", name, err)
		return 2
	}
	return commands[selected](stdout, stderr)
}

func newApp() (*kingpin.Application, map[string]command) {
	app := kingpin.New(name, "Prometheus exporter for the NVIDIA DGX Spark (GB10): unified memory pool, GPU, thermal throttling and workloads.")
	app.Version(version.Print(name))
	app.HelpFlag.Short('h')

	procfs := app.Flag("path.procfs", "procfs mount point; every /proc read goes through it.").Default("/proc").String()
	sysfs := app.Flag("path.sysfs", "sysfs mount point; every /sys read goes through it.").Default("/sys").String()
	readTimeout := cliflag.Duration(app.Flag("path.read-timeout",
		"Deadline of a collector run's reads under --path.procfs and --path.sysfs: a file that does not answer in time "+
			"(a process stuck in the kernel holds its /proc files) fails its collector, not the scrape.").
		Default(hostfs.DefaultTimeout.String()))

	// Serving flags belong to serve, so that each command's --help starts
	// with its own flags; withCommand makes serve the default.
	serveCmd := app.Command("serve", "Serve metrics (the default command).").Default()
	serveRun := serveCommand(serveCmd, procfs, sysfs, readTimeout)
	commands := map[string]command{
		serveCmd.FullCommand(): serveRun,
		"plan":                 planCommand(app, procfs),
		"report":               reportCommand(app),
	}
	commands["status"] = statusCommand(app)
	return app, commands
}

func parse(app *kingpin.Application, args []string) (string, error) {
	if err := cliflag.RefuseSwitchValues(app.Model(), args); err != nil {
		return "", err
	}
	return app.Parse(withCommand(app.Model(), args))
}

// withCommand puts the default command first where args name none: kingpin
// knows a command's flags only once the command is named.
func withCommand(app *kingpin.ApplicationModel, args []string) []string {
	var def string
	names := map[string]bool{"help": true}
	for _, c := range app.Commands {
		names[c.Name] = true
		if c.Default {
			def = c.Name
		}
	}
	for _, a := range args {
		if a == "--" {
			break
		}
		if names[a] {
			return args
		}
	}
	if def == "" {
		return args
	}
	return append([]string{def}, args...)
}
