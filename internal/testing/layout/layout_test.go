// Package layout checks that a package's path tells whether it ships: the
// product is cmd/spark_exporter and the packages it imports; what only tests
// import lives under internal/testing/, helper commands under tools/, and
// the end-to-end test under test/.
package layout

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The trees whose packages never ship.
const (
	testTree  = "internal/testing"
	toolsTree = "tools"
	e2eTree   = "test"
)

// The one command that ships.
const product = "cmd/spark_exporter"

// pkg is the part of `go list -json` the rules read.
type pkg struct {
	ImportPath string
	Name       string
	GoFiles    []string // non-test Go files, cgo ones included with CgoFiles
	CgoFiles   []string
}

// under reports whether rel is dir or inside it.
func under(rel, dir string) bool {
	return rel == dir || strings.HasPrefix(rel, dir+"/")
}

// layoutErrors lists every package whose place disagrees with whether it
// ships. module is the module path, shipped the import paths of the
// product's dependencies (itself included), pkgs every package of the module.
func layoutErrors(module string, shipped map[string]bool, pkgs []pkg) []string {
	var errs []string
	for _, p := range pkgs {
		rel := strings.TrimPrefix(p.ImportPath, module+"/")
		nonShipping := under(rel, testTree) || under(rel, toolsTree) || under(rel, e2eTree)
		hasCode := len(p.GoFiles)+len(p.CgoFiles) > 0
		switch {
		case shipped[p.ImportPath] && nonShipping:
			errs = append(errs, fmt.Sprintf("%s is imported by %s, so it ships: it does not belong under %s/, %s/ or %s/", rel, product, testTree, toolsTree, e2eTree))
		case !shipped[p.ImportPath] && !nonShipping && hasCode:
			// Packages of tests alone (dashboards/, rules/, …) have no
			// non-test files and are not imported by anything.
			errs = append(errs, fmt.Sprintf("%s does not ship (%s does not import it): move it under %s/ (imported by tests) or %s/ (a command)", rel, product, testTree, toolsTree))
		}
		if hasCode && p.Name == "main" && rel != product && !under(rel, toolsTree) {
			errs = append(errs, fmt.Sprintf("%s is a command: helper commands live under %s/", rel, toolsTree))
		}
		if hasCode && p.Name != "main" && under(rel, toolsTree) {
			errs = append(errs, fmt.Sprintf("%s is a library under %s/, which holds commands: put it under %s/", rel, toolsTree, testTree))
		}
	}
	return errs
}

// goList runs the go command in the module's root directory.
func goList(t *testing.T, args ...string) []byte {
	t.Helper()
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(gomod)))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

func TestLayout(t *testing.T) {
	module := strings.TrimSpace(string(goList(t, "-m")))
	shipped := map[string]bool{}
	for _, line := range strings.Fields(string(goList(t, "-deps", "-f", "{{.ImportPath}}", "./"+product))) {
		if strings.HasPrefix(line, module+"/") {
			shipped[line] = true
		}
	}
	if !shipped[module+"/"+product] || !shipped[module+"/collector"] {
		t.Fatalf("go list -deps ./%s did not list the product and its collector package: %v", product, shipped)
	}

	// -e: test/e2e has only files behind the e2e build tag, which go list
	// reports as an error; it has no non-test code either way.
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(goList(t, "-e", "-json", "./...")))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list -json: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	for _, e := range layoutErrors(module, shipped, pkgs) {
		t.Error(e)
	}
}

// Each rule reports the package that breaks it, so TestLayout can fail.
func TestLayoutErrors(t *testing.T) {
	const m = "example.com/x"
	code := []string{"a.go"}
	shipped := map[string]bool{m + "/cmd/spark_exporter": true, m + "/internal/pool": true, m + "/internal/testing/leak": true}
	pkgs := []pkg{
		{ImportPath: m + "/cmd/spark_exporter", Name: "main", GoFiles: code},
		{ImportPath: m + "/internal/pool", Name: "pool", GoFiles: code},
		{ImportPath: m + "/internal/testing/fakeproc", Name: "fakeproc", GoFiles: code},
		{ImportPath: m + "/tools/standin", Name: "main", CgoFiles: code},
		{ImportPath: m + "/dashboards", Name: "dashboards"}, // tests only
		{ImportPath: m + "/internal/testing/leak", Name: "leak", GoFiles: code},
		{ImportPath: m + "/internal/helper", Name: "helper", GoFiles: code},
		{ImportPath: m + "/scripts/gen", Name: "main", GoFiles: code},
		{ImportPath: m + "/tools/lib", Name: "lib", GoFiles: code},
	}
	got := strings.Join(layoutErrors(m, shipped, pkgs), "\n")
	for _, want := range []string{
		"internal/testing/leak is imported by cmd/spark_exporter",
		"internal/helper does not ship",
		"scripts/gen does not ship",
		"scripts/gen is a command",
		"tools/lib is a library under tools/",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("no error saying %q; got:\n%s", want, got)
		}
	}
	if n := strings.Count(got, "\n") + 1; n != 5 {
		t.Errorf("%d errors, want 5 (one per broken rule):\n%s", n, got)
	}
}

// The packages that only judge or present what was read, with the
// libraries they must not link: the status page and `report` run where
// no GPU driver is, and internal/judge takes plain values. ("os" itself
// cannot be refused: fmt imports it.)
var pureOf = map[string][]string{
	"internal/judge":  {"github.com/NVIDIA/go-nvml", "github.com/go-kit/log", "net/http", "os/exec"},
	"internal/status": {"github.com/NVIDIA/go-nvml"},
	"internal/report": {"github.com/NVIDIA/go-nvml"},
	// The collectors' typed state, which every view renders.
	"internal/collected": {"github.com/NVIDIA/go-nvml", "github.com/go-kit/log", "net/http", "os/exec"},
}

// forbiddenDeps names each dependency of a pure package that it must not
// have; a forbidden path matches the package itself and those under it.
func forbiddenDeps(deps, forbidden []string) []string {
	var bad []string
	for _, d := range deps {
		for _, f := range forbidden {
			if d == f || strings.HasPrefix(d, f+"/") {
				bad = append(bad, d)
			}
		}
	}
	return bad
}

func TestPurePackagesLinkNoIO(t *testing.T) {
	for rel, forbidden := range pureOf {
		deps := strings.Fields(string(goList(t, "-deps", "-f", "{{.ImportPath}}", "./"+rel)))
		if len(deps) == 0 {
			t.Fatalf("go list -deps ./%s listed nothing", rel)
		}
		for _, d := range forbiddenDeps(deps, forbidden) {
			t.Errorf("%s depends on %s", rel, d)
		}
	}
}

func TestForbiddenDeps(t *testing.T) {
	deps := []string{"fmt", "github.com/NVIDIA/go-nvml/pkg/nvml", "os/exec", "os"}
	got := forbiddenDeps(deps, []string{"github.com/NVIDIA/go-nvml", "os"})
	if strings.Join(got, " ") != "github.com/NVIDIA/go-nvml/pkg/nvml os/exec os" {
		t.Errorf("forbiddenDeps = %v", got)
	}
}
