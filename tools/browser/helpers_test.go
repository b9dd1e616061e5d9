package browser

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
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

// startSpark runs the exporter on the Spark fixture /proc and /sys and the
// GB10 stand-in NVML, whose scenario and clock come from env
// (SPARK_NVML_SCENARIO, SPARK_NVML_FREEZE).
func startSpark(t *testing.T, env []string, args ...string) *testexporter.Process {
	t.Helper()
	root := testexporter.Root(t)
	return testexporter.Start(t, env, append([]string{
		"--path.procfs=" + filepath.Join(root, "testdata", "proc", "spark"),
		"--path.sysfs=" + filepath.Join(root, "testdata", "sys", "spark"),
		"--gpu.nvml-library=" + testexporter.StandInNVML(t),
	}, args...)...)
}

// frozenAt is the environment that plays the shipped scenario name stopped
// at scenario time at (a Go duration).
func frozenAt(t *testing.T, name, at string) []string {
	return []string{"SPARK_NVML_SCENARIO=" + testexporter.Scenario(t, name), "SPARK_NVML_FREEZE=" + at}
}

// frozenThrottling is the gb10-throttle scenario frozen at 45 minutes, 88 °C
// on the ~100 W plateau, on a driver that reports its clock event flags:
// frozen, a GB10's flags-clear snapshot is only "hot, clock holding", and
// the flags make it throttled.
func frozenThrottling(t *testing.T) []string {
	t.Helper()
	base, err := os.ReadFile(testexporter.Scenario(t, "gb10-throttle"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "gb10-throttle-flags.scenario")
	if err := os.WriteFile(path, append([]byte("clocks_event_flags reported\n"), base...), 0o644); err != nil {
		t.Fatal(err)
	}
	return []string{"SPARK_NVML_SCENARIO=" + path, "SPARK_NVML_FREEZE=45m"}
}

// value is the sample of an unlabelled series in a /metrics text.
func value(metrics, series string) (v float64, ok bool) {
	for _, line := range strings.Split(metrics, "\n") {
		if rest, found := strings.CutPrefix(line, series+" "); found {
			v, err := strconv.ParseFloat(rest, 64)
			return v, err == nil
		}
	}
	return 0, false
}
