package testexporter

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// StartSpark runs the exporter on the Spark fixture /proc and /sys and the
// GB10 stand-in NVML, whose scenario and clock come from env
// (SPARK_NVML_SCENARIO, SPARK_NVML_FREEZE).
func StartSpark(t *testing.T, env []string, args ...string) *Process {
	t.Helper()
	root := Root(t)
	return Start(t, env, append([]string{
		"--path.procfs=" + filepath.Join(root, "testdata", "proc", "spark"),
		"--path.sysfs=" + filepath.Join(root, "testdata", "sys", "spark"),
		"--gpu.nvml-library=" + StandInNVML(t),
	}, args...)...)
}

// FrozenAt is the environment that plays the shipped scenario name stopped
// at scenario time at (a Go duration).
func FrozenAt(t *testing.T, name, at string) []string {
	return []string{"SPARK_NVML_SCENARIO=" + Scenario(t, name), "SPARK_NVML_FREEZE=" + at}
}

// FrozenThrottling is the gb10-throttle scenario frozen at 45 minutes, 88 °C
// on the ~100 W plateau in thermal slowdown, on a driver that reports its
// clock event flags. Frozen, the clock cannot fall and the counters do not
// grow, so a GB10's flags-clear snapshot is only "hot, clock holding"; the
// flags make it throttled, for the pages that show throttling.
func FrozenThrottling(t *testing.T) []string {
	t.Helper()
	base, err := os.ReadFile(Scenario(t, "gb10-throttle"))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "gb10-throttle-flags.scenario")
	if err := os.WriteFile(path, append([]byte("clocks_event_flags reported\n"), base...), 0o644); err != nil {
		t.Fatal(err)
	}
	return []string{"SPARK_NVML_SCENARIO=" + path, "SPARK_NVML_FREEZE=45m"}
}

// Value is the sample of series, written as the text exposition writes it
// (labels sorted), in metrics; ok is false when it is absent.
func Value(metrics, series string) (v float64, ok bool) {
	for _, line := range strings.Split(metrics, "\n") {
		if rest, found := strings.CutPrefix(line, series+" "); found {
			v, err := strconv.ParseFloat(rest, 64)
			return v, err == nil
		}
	}
	return 0, false
}
