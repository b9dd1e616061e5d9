// Command prometheusrule writes examples/kubernetes/prometheusrule.yaml from
// rules/*.yml (run by `make kubernetes-rules`, from the repository root).
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spark-exporter/spark_exporter/internal/testing/kuberules"
)

const (
	rulesDir = "rules"
	out      = "examples/kubernetes/prometheusrule.yaml"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "prometheusrule:", err)
		os.Exit(1)
	}
}

func run() error {
	files, err := kuberules.ReadDir(rulesDir)
	if err != nil {
		return err
	}
	manifest, err := kuberules.PrometheusRule(files)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(out), ".prometheusrule-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(manifest); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), out)
}
