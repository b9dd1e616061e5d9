package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
)

// readmeCommands are the command lines README.md shows: every line of its
// ```sh blocks, and the "$ " lines of its other blocks, continuation lines
// joined, comments dropped, `a && b` split in two.
func readmeCommands(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testexporter.Root(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var cmds []string
	var lang string
	inBlock := false
	pending := ""
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "```") {
			inBlock, lang = !inBlock, strings.TrimPrefix(line, "```")
			continue
		}
		if !inBlock {
			continue
		}
		switch {
		case pending != "":
		case lang == "sh":
		case strings.HasPrefix(line, "$ "):
			line = strings.TrimPrefix(line, "$ ")
		default:
			continue
		}
		if i := strings.Index(line, " #"); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		if cont, ok := strings.CutSuffix(line, `\`); ok {
			pending += cont
			continue
		}
		line, pending = strings.TrimSpace(pending+line), ""
		for _, c := range strings.Split(line, "&&") {
			if c = strings.TrimSpace(c); c != "" {
				cmds = append(cmds, c)
			}
		}
	}
	return cmds
}

// What this test does not run, by the command's first word, and why.
var readmeNotRun = map[string]string{
	"sudo":      "installs on the host",
	"systemctl": "needs a booted systemd and the installed package",
	"tar":       "needs the release tarball (make test-release unpacks and runs it)",
	"docker":    "no Docker engine here (CONTRIBUTING.md#packaging)",
	"python":    "the user's training script",
}

// warning is a line of a report that warns: plan's "warn:" checks, or a
// warning on stderr.
var warning = regexp.MustCompile(`(?im)^.*\bwarn(ing)?\b.*$`)

// Every command README.md shows runs and says nothing against itself: the
// exporter's subcommands on the fixtures (plan on an idle Spark's /proc, so
// that the verdict depends on the plan, not on this machine's memory; report
// on the nvidia-smi capture the README's output came from), `make` targets
// as a dry run (`make -n`: the target exists and its prerequisites resolve;
// running them is what `make test` does). Lines that install, need a
// Docker engine or systemd, or are the user's own are listed in
// readmeNotRun with the reason.
func TestReadmeCommands(t *testing.T) {
	root := testexporter.Root(t)
	cmds := readmeCommands(t)
	ran := 0
	for _, line := range cmds {
		t.Run(line, func(t *testing.T) {
			words := strings.Fields(line)
			if reason, ok := readmeNotRun[words[0]]; ok {
				t.Skipf("not run: %s", reason)
			}
			dir := t.TempDir()
			var cmd *exec.Cmd
			switch words[0] {
			case "make":
				cmd = exec.Command("make", append([]string{"-n", "--no-print-directory"}, words[1:]...)...)
				cmd.Dir = root
			case "spark_exporter":
				// Through sh, as a user types it (quotes and all), with
				// spark_exporter on PATH; a redirect is the user's file,
				// left out so that the output is checked here.
				shell, _, _ := strings.Cut(line, " > ")
				switch {
				case len(words) > 1 && words[1] == "plan":
					shell += " --path.procfs=" + filepath.Join(root, "testdata", "proc", "idle")
				case len(words) > 2 && words[1] == "report":
					log, err := os.ReadFile(filepath.Join(root, "testdata", "thermal", "nvidia-smi-default-units.csv"))
					if err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(filepath.Join(dir, words[2]), log, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				bin := filepath.Join(dir, "bin")
				if err := os.Mkdir(bin, 0o755); err != nil {
					t.Fatal(err)
				}
				var quoted []string
				for _, a := range testexporter.Command(t).Args {
					quoted = append(quoted, "'"+strings.ReplaceAll(a, "'", `'\''`)+"'")
				}
				wrapper := "#!/bin/sh\nexec " + strings.Join(quoted, " ") + ` "$@"` + "\n"
				if err := os.WriteFile(filepath.Join(bin, "spark_exporter"), []byte(wrapper), 0o755); err != nil {
					t.Fatal(err)
				}
				cmd = exec.Command("sh", "-c", shell)
				cmd.Dir = dir
				cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
			default:
				t.Fatalf("README.md shows %q, which this test neither runs nor lists in readmeNotRun", line)
			}
			ran++
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if words[0] == "spark_exporter" {
				if w := warning.FindAllString(string(out), -1); len(w) > 0 {
					t.Errorf("warns about itself:\n%s", strings.Join(w, "\n"))
				}
			}
		})
	}
	if ran < 5 {
		t.Errorf("ran %d of README.md's commands %q: the parser has lost them", ran, cmds)
	}
}
