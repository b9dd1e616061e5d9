package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/alecthomas/kingpin/v2"
)

func TestBadFlagsExitTwoNamingTheFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--pool.reserve=lots"}, "--pool.reserve"},
		{[]string{"--web.max-requests=-3"}, "--web.max-requests"},
		{[]string{"--log.level=loud"}, "log.level"},
		{[]string{"--workloads.match=training:x:(unclosed"}, "for flag --workloads.match: bad regular expression"},
		{[]string{"--workloads.match=training:x:ok", "--workloads.match=server:x:y"}, "for flag --workloads.match: role must be"},
		{[]string{"--no-such-flag"}, "unknown long flag '--no-such-flag'"},
		{[]string{"--gpu.x=maybe"}, "unknown long flag '--gpu.x'"},
		{[]string{"--collector.gpu=maybe"}, `invalid value "maybe" for flag --collector.gpu: a switch takes no value`},
		{[]string{"--web.telemetry-path=metrics"}, "for flag --web.telemetry-path: must start with /"},
		{[]string{"--log.format=xml"}, "for flag --log.format: must be one of logfmt, json"},
		{[]string{"plan", "--model-size=8B", "--method=lora", "--json=yes"}, "for flag --json"},
		{[]string{"plan", "--model-size=8B", "--method=lora", "--no-such-flag"}, "unknown long flag '--no-such-flag'"},
		{[]string{"serve", "extra-argument"}, "unexpected extra-argument"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(tc.args, &stdout, &stderr); code != 2 {
			t.Errorf("%v: exit %d, want 2", tc.args, code)
		}
		if !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: stderr %q does not name %q", tc.args, stderr.String(), tc.want)
		}
	}
}

func TestVersionAndHelpExitZero(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"--help"}} {
		var stdout, stderr bytes.Buffer
		if code := run(args, &stdout, &stderr); code != 0 {
			t.Errorf("%v: exit %d, want 0; stderr: %s", args, code, stderr.String())
		}
		if !strings.Contains(stdout.String()+stderr.String(), name) {
			t.Errorf("%v printed nothing about %s", args, name)
		}
	}
}

// freeText lists the flags whose value is any text (a path, an address):
// no value is bad at parse time; each is checked where it is used
// (TestBadStartValuesNameTheFlag, docs/robustness.md).
var freeText = map[string]bool{
	"path.procfs": true, "path.sysfs": true, "web.listen-address": true, "web.config.file": true,
	"gpu.nvml-library": true, "plan.file": true, "thermal.csv-file": true,
	// An unreadable kernel log or journal is no error (spark_kernel_field_supported,
	// spark_journal_field_supported); the flight file is checked when the recorder opens it.
	"kernel.kmsg-path": true, "journal.path": true, "flight.file": true,
	// report: files, and the instance label (checked against Prometheus).
	"http.config.file": true, "prometheus.basic-auth-user": true, "prometheus.basic-auth-password-file": true,
	"prometheus.tls-ca-file": true, "prometheus.tls-cert-file": true, "prometheus.tls-key-file": true,
	"instance": true, "svg": true, "gpu.name": true,
	// status: a user name and a file, checked when the client is made.
	"basic-auth-user": true, "basic-auth-password-file": true,
	// serve: a key file, read at start, and a socket, asked at a scrape.
	"engines.bearer-token-file": true, "workloads.docker-socket": true,
}

// Every flag of every command refuses a bad value naming the flag: a switch
// given a value, and for all other flags but the free-text ones, a value
// that no parser accepts. A flag added later with one of kingpin's own typed
// values (whose errors do not name the flag) fails here.
func TestEveryFlagRefusesABadValueByName(t *testing.T) {
	app, _ := newApp()
	check := func(args []string, flag *kingpin.FlagModel) {
		t.Helper()
		_, err := parse(app, args)
		if err == nil || !strings.Contains(err.Error(), "--"+flag.Name) {
			t.Errorf("%q: error %v does not name --%s", args, err, flag.Name)
		}
	}
	tried := 0
	for _, cmd := range append([]*kingpin.CmdModel{nil}, app.Model().Commands...) {
		flags, prefix := app.Model().Flags, []string(nil)
		if cmd != nil {
			// The plan command's required flags, so that the one tried is
			// what fails.
			flags, prefix = cmd.Flags, []string{cmd.Name}
			if cmd.Name == "plan" {
				prefix = append(prefix, "--model-size=8B", "--method=lora")
			}
		}
		for _, f := range flags {
			switch {
			case f.Name == "help" || f.Name == "version" || f.Hidden:
			case f.IsBoolFlag():
				check(append(prefix, "--"+f.Name+"=maybe"), f)
				check(append(prefix, "--no-"+f.Name+"=0"), f)
				tried++
			case freeText[f.Name]:
				if typ := fmt.Sprintf("%T", f.Value); typ != "*kingpin.stringValue" && typ != "*kingpin.accumulator" {
					t.Errorf("--%s: free text, but of type %s", f.Name, typ)
				}
			default:
				args := append([]string(nil), prefix...)
				// A required flag is replaced, not given twice.
				args = slicesDeleteFlag(args, f.Name)
				check(append(args, "--"+f.Name+"=\x01bad value"), f)
				tried++
			}
		}
	}
	if tried < 30 {
		t.Errorf("only %d flags tried: is the walk over the model broken?", tried)
	}
}

func slicesDeleteFlag(args []string, flag string) []string {
	var out []string
	for _, a := range args {
		if !strings.HasPrefix(a, "--"+flag+"=") {
			out = append(out, a)
		}
	}
	return out
}

// Free-text flags that cannot work stop the exporter at start (exit 1),
// with a line that names the flag and not the value, which may be a
// private path.
func TestBadStartValuesNameTheFlag(t *testing.T) {
	file := filepath.Join(t.TempDir(), "secret-name")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args       []string
		want, path string
	}{
		{[]string{"--path.procfs=/nonexistent/secret-dir"}, "--path.procfs: no such file or directory", "secret-dir"},
		{[]string{"--path.procfs=" + file}, "--path.procfs: not a directory", "secret-name"},
		{[]string{"--path.procfs=" + fixtureDir(t, "spark"), "--path.sysfs=/nonexistent/secret-dir"}, "--path.sysfs: no such file or directory", "secret-dir"},
		{[]string{"--path.procfs=" + fixtureDir(t, "spark"), "--path.sysfs=" + file}, "--path.sysfs: not a directory", "secret-name"},
		{[]string{"--path.procfs=" + fixtureDir(t, "spark"), "--web.listen-address=bad:address:x"}, "check --web.listen-address", ""},
		{[]string{"--path.procfs=" + fixtureDir(t, "spark"), "--web.config.file=/nonexistent/secret-dir/web.yml"}, "invalid --web.config.file: no such file", "secret-dir"},
		{[]string{"--path.procfs=" + fixtureDir(t, "spark"), "--plan.file=/nonexistent/secret-dir/plans.yml"}, "--plan.file: cannot read the file: no such file", "secret-dir"},
	} {
		out := refusedAtStart(t, nil, append([]string{noGPU}, tc.args...)...)
		if !strings.Contains(out, tc.want) {
			t.Errorf("%q: the error does not say %q:\n%s", tc.args, tc.want, out)
		}
		if tc.path != "" && strings.Contains(out, tc.path) {
			t.Errorf("%q: the error names the path:\n%s", tc.args, out)
		}
	}
}
