package standin

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// LibraryName is the file name NVML's users dlopen.
const LibraryName = "libnvidia-ml.so.1"

const (
	selfPackage = "github.com/spark-exporter/spark_exporter/internal/testing/standin"
	nvmlModule  = "github.com/NVIDIA/go-nvml"
)

// Build compiles the stand-in into outDir/libnvidia-ml.so.1 and returns
// that path. moduleDir is any directory inside this repository's module: it
// is where `go list` finds the C sources and go-nvml's nvml.h. The C
// compiler is $CC, or gcc, so that a cross compiler builds it for another
// architecture.
func Build(moduleDir, outDir string) (string, error) {
	srcDir, err := goList(moduleDir, "-f", "{{.Dir}}", selfPackage)
	if err != nil {
		return "", err
	}
	nvmlDir, err := goList(moduleDir, "-m", "-f", "{{.Dir}}", nvmlModule)
	if err != nil {
		return "", err
	}
	nvmlDir = filepath.Join(nvmlDir, "pkg", "nvml")
	header, err := os.ReadFile(filepath.Join(nvmlDir, "nvml.h"))
	if err != nil {
		return "", fmt.Errorf("reading go-nvml's header: %w", err)
	}
	decls, err := ParseHeader(header)
	if err != nil {
		return "", fmt.Errorf("go-nvml's nvml.h: %w", err)
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return "", err
	}
	stubs := filepath.Join(outDir, "stubs.c")
	if err := os.WriteFile(stubs, Stubs(decls), 0o644); err != nil {
		return "", err
	}

	lib := filepath.Join(outDir, LibraryName)
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "gcc"
	}
	args := []string{
		"-shared", "-fPIC", "-O2", "-std=gnu11", "-Wall",
		// The header marks old entry points deprecated; defining them is
		// what a stand-in must do.
		"-Wno-deprecated-declarations",
		// The same switch go-nvml compiles with: every versioned name is
		// declared as itself, none is #defined to its successor.
		"-DNVML_NO_UNVERSIONED_FUNC_DEFS=1",
		"-I", nvmlDir, "-I", srcDir,
		"-Wl,-soname," + LibraryName,
		"-o", lib,
		filepath.Join(srcDir, "gb10.c"), filepath.Join(srcDir, "scenario.c"), stubs,
		"-lpthread", "-lm",
	}
	cmd := exec.Command(cc, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s: %v\n%s", cc, err, out.String())
	}
	return lib, nil
}

func goList(dir string, args ...string) (string, error) {
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go list %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
}
