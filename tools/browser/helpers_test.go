package browser

import (
	"path/filepath"
	"testing"

	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
)

// The fixtures and stand-in scenarios of cmd/spark_exporter's tests, for
// the same exporter runs seen through a browser.

func fixtureDir(t testing.TB, name string) string {
	return filepath.Join(testexporter.Root(t), "testdata", "proc", name)
}

// noGPU is a --gpu.nvml-library that does not exist: the exporter as on a
// machine without NVIDIA's driver.
const noGPU = "--gpu.nvml-library=/nonexistent/libnvidia-ml.so.1"
