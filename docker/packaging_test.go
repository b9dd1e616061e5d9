// Package docker holds the container image's Dockerfile; its tests check
// that the three ways of building spark_exporter (the Makefile, promu's
// .promu.yml and the Dockerfile) build the same program the same way.
package docker

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"text/template"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
)

// promu is the part of .promu.yml this test reads, with promu's own
// defaults (build.static is true unless the file says otherwise).
type promu struct {
	Go struct {
		Version string `yaml:"version"`
		CGo     bool   `yaml:"cgo"`
	} `yaml:"go"`
	Build struct {
		Binaries []struct {
			Name string `yaml:"name"`
			Path string `yaml:"path"`
		} `yaml:"binaries"`
		Flags      string   `yaml:"flags"`
		LDFlags    string   `yaml:"ldflags"`
		ExtLDFlags []string `yaml:"extldflags"`
		Static     *bool    `yaml:"static"`
	} `yaml:"build"`
	Crossbuild struct {
		Platforms []string `yaml:"platforms"`
	} `yaml:"crossbuild"`
}

func readPromu(t *testing.T, root string) promu {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, ".promu.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var p promu
	if err := yaml.Unmarshal(data, &p); err != nil {
		t.Fatalf(".promu.yml: %v", err)
	}
	return p
}

// makeCmd runs make in root as from a shell, not as a sub-make of the
// `make unit` running this test (whose MAKEFLAGS would pass on).
func makeCmd(root string, args ...string) *exec.Cmd {
	cmd := exec.Command("make", append([]string{"--no-print-directory"}, args...)...)
	cmd.Dir = root
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if name != "MAKEFLAGS" && name != "MFLAGS" && name != "MAKELEVEL" {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	return cmd
}

// makeVars prints Makefile variables by adding a rule from stdin, so the
// Makefile needs no target for this test.
func makeVars(t *testing.T, root string, names ...string) map[string]string {
	t.Helper()
	var rule strings.Builder
	rule.WriteString("print-packaging-vars:\n")
	for _, n := range names {
		rule.WriteString("\t@echo '" + n + "=$(" + n + ")'\n")
	}
	cmd := makeCmd(root, "-s", "-f", "Makefile", "-f", "-", "print-packaging-vars")
	cmd.Stdin = strings.NewReader(rule.String())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make: %v\n%s", err, out)
	}
	vars := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		k, v, _ := strings.Cut(line, "=")
		vars[k] = strings.TrimSpace(v)
	}
	return vars
}

func gitOutput(t *testing.T, root string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %s: %v", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out))
}

func commandOutput(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).Output()
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return strings.TrimSpace(string(out))
}

var xFlag = regexp.MustCompile(`-X ([^ =]+)=([^\s"']*)`)

func xFlags(ldflags string) map[string]string {
	m := map[string]string{}
	for _, x := range xFlag.FindAllStringSubmatch(ldflags, -1) {
		m[x[1]] = x[2]
	}
	return m
}

// The version variables get the same values from `make build` as from
// `promu build` on the same checkout, and both link the same way: promu's
// ldflags template is rendered here as promu renders it.
func TestPromuAndMakefileAgree(t *testing.T) {
	root := testexporter.Root(t)
	p := readPromu(t, root)

	// The Makefile's build command, as make would run it.
	cmd := makeCmd(root, "-n", "build")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make -n build: %v\n%s", err, out)
	}
	buildLine := string(out)
	makeX := xFlags(buildLine)

	version, err := os.ReadFile(filepath.Join(root, "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	info := struct{ Version, Revision, Branch string }{
		Version:  strings.TrimSpace(string(version)),
		Revision: gitOutput(t, root, "rev-parse", "HEAD"),
		Branch:   gitOutput(t, root, "rev-parse", "--abbrev-ref", "HEAD"),
	}
	buildDate := time.Now().UTC()
	var dateLayout string
	funcs := template.FuncMap{
		"date": func(layout string) string { dateLayout = layout; return buildDate.Format(layout) },
		"host": os.Hostname,
		"user": func() string { return commandOutput(t, "whoami") },
	}
	tmpl, err := template.New("ldflags").Funcs(funcs).Parse(p.Build.LDFlags)
	if err != nil {
		t.Fatalf(".promu.yml build.ldflags: %v", err)
	}
	var rendered bytes.Buffer
	if err := tmpl.Execute(&rendered, info); err != nil {
		t.Fatalf(".promu.yml build.ldflags: %v", err)
	}
	promuX := xFlags(rendered.String())

	if len(promuX) == 0 {
		t.Fatal(".promu.yml sets no -X flags")
	}
	for k, pv := range promuX {
		mv, ok := makeX[k]
		switch {
		case !ok:
			t.Errorf("-X %s is in .promu.yml, not in the Makefile's LDFLAGS", k)
		case strings.HasSuffix(k, ".BuildDate"):
			// The clock moves between the two: compare the format.
			if _, err := time.Parse(dateLayout, mv); err != nil {
				t.Errorf("BuildDate %q from the Makefile is not in promu's layout %q", mv, dateLayout)
			}
		case mv != pv:
			t.Errorf("-X %s: Makefile %q, promu %q", k, mv, pv)
		}
	}
	for k := range makeX {
		if _, ok := promuX[k]; !ok {
			t.Errorf("-X %s is in the Makefile's LDFLAGS, not in .promu.yml", k)
		}
	}

	// promu links statically unless told not to; the Makefile does not, and
	// must not: go-nvml dlopens libnvidia-ml, which a static glibc binary
	// cannot do reliably.
	static := p.Build.Static == nil || *p.Build.Static
	if static || len(p.Build.ExtLDFlags) > 0 || strings.Contains(buildLine, "-extldflags") {
		t.Errorf("link flags differ: promu static=%v extldflags=%v; Makefile: %s", static, p.Build.ExtLDFlags, buildLine)
	}
	if p.Build.Flags != "" {
		t.Errorf(".promu.yml build.flags %q: the Makefile passes none", p.Build.Flags)
	}
	if len(p.Build.Binaries) != 1 || !strings.Contains(buildLine, " -o "+p.Build.Binaries[0].Name+" ") ||
		!strings.HasSuffix(strings.TrimSpace(buildLine), p.Build.Binaries[0].Path) {
		t.Errorf("binaries %+v, Makefile builds: %s", p.Build.Binaries, buildLine)
	}

	vars := makeVars(t, root, "PLATFORMS", "CGO_ENABLED")
	if got, want := strings.Fields(vars["PLATFORMS"]), p.Crossbuild.Platforms; !slices.Equal(got, want) {
		t.Errorf("platforms: Makefile %v, .promu.yml %v", got, want)
	}
	if (vars["CGO_ENABLED"] == "1") != p.Go.CGo {
		t.Errorf("cgo: Makefile CGO_ENABLED=%s, .promu.yml go.cgo=%v", vars["CGO_ENABLED"], p.Go.CGo)
	}
	if goMod := goVersion(t, root); p.Go.Version != goMod {
		t.Errorf("Go: .promu.yml %s, go.mod %s", p.Go.Version, goMod)
	}
}

// goVersion is go.mod's go directive as major.minor.
func goVersion(t *testing.T, root string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(data)
	if m == nil {
		t.Fatal("go.mod has no go directive")
	}
	return string(m[1])
}

// instructions returns the Dockerfile's instructions, continuation lines
// joined and comments dropped, as "KEYWORD arguments".
func instructions(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(string(data), "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") || (trimmed == "" && cur.Len() == 0) {
			continue
		}
		if body, ok := strings.CutSuffix(trimmed, `\`); ok {
			cur.WriteString(body + " ")
			continue
		}
		cur.WriteString(trimmed)
		if s := strings.TrimSpace(cur.String()); s != "" {
			out = append(out, s)
		}
		cur.Reset()
	}
	return out
}

// The image is built by `make build` (so with the Makefile's flags, which
// the test above ties to .promu.yml), for every platform the Makefile
// releases, with the Go of go.mod, and runs as non-root with NVML only.
func TestDockerfileBuildsWithTheMakefile(t *testing.T) {
	root := testexporter.Root(t)
	ins := instructions(t)
	var runs, final []string
	stages := 0
	for _, in := range ins {
		keyword, args, _ := strings.Cut(in, " ")
		switch strings.ToUpper(keyword) {
		case "FROM":
			stages++
			final = nil
		case "RUN":
			runs = append(runs, args)
		}
		final = append(final, in)
	}
	if stages < 2 {
		t.Errorf("%d stages: want a build stage and a runtime stage", stages)
	}
	all := strings.Join(runs, "\n")
	if !strings.Contains(all, "make build") {
		t.Error("no RUN make build: the image must be built by the Makefile's command")
	}
	if strings.Contains(all, "go build") {
		t.Error("a RUN calls go build directly: use make build, so flags cannot drift")
	}

	if !slices.Contains(ins, "ARG GO_VERSION="+goVersion(t, root)) {
		t.Errorf("want ARG GO_VERSION=%s as go.mod says", goVersion(t, root))
	}

	vars := makeVars(t, root, "PLATFORMS")
	for _, platform := range strings.Fields(vars["PLATFORMS"]) {
		arch := strings.TrimPrefix(platform, "linux/")
		if !strings.Contains(all, arch+")") {
			t.Errorf("the Dockerfile has no case for %s, which the Makefile releases", platform)
		}
	}

	runtime := strings.Join(final, "\n")
	user := regexp.MustCompile(`(?m)^USER (\S+)`).FindStringSubmatch(runtime)
	if user == nil || strings.HasPrefix(user[1], "root") || strings.HasPrefix(user[1], "0") {
		t.Errorf("the runtime stage must set a non-root USER, got %v", user)
	}
	for _, want := range []string{"NVIDIA_DRIVER_CAPABILITIES=utility", "EXPOSE 10240", `ENTRYPOINT ["/bin/spark_exporter"]`} {
		if !strings.Contains(runtime, want) {
			t.Errorf("the runtime stage lacks %s", want)
		}
	}
}
