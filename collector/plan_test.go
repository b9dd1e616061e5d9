package collector

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/alecthomas/kingpin/v2"
)

const planFixture = "../testdata/plans/spark.yml"

func selection(t *testing.T, args ...string) *Selection {
	t.Helper()
	app := kingpin.New("t", "")
	s := AddFlags(app)
	if _, err := app.Parse(args); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestPlanCollectorOnFixture(t *testing.T) {
	e, err := selection(t, "--plan.file="+planFixture).Build(testEnv())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	f, err := e.Filter([]string{"plan"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := gatherAll(t, f)
	delete(got, `spark_scrape_collector_duration_seconds{collector="plan"}`)
	compare(t, got, map[string]float64{
		`spark_scrape_collector_success{collector="plan"}`: 1,
		// 70B in NF4 is 35 GB; mmap'd and copied at once at load: 70 GB,
		// more than its ~40 GB steady state.
		`spark_plan_required_bytes{plan="llama-3.1-70b-qlora"}`: 70e9,
		// 27B in bf16 is 54 GB: 108 GB at load.
		`spark_plan_required_bytes{plan="gemma-2-27b-lora"}`: 108e9,
		// Full fine-tune, 9B: weights 18 + 8-bit AdamW 18 + gradients 18 GB,
		// and checkpointed activations 2048 × 3584 × (2·42 + 34) B.
		`spark_plan_required_bytes{plan="gemma-2-9b-full"}`: 54e9 + 2048*3584*(2*42+34),
	})
}

func TestPlanCollectorSwitch(t *testing.T) {
	for _, tc := range []struct {
		args []string
		on   bool
	}{
		{nil, false}, // no file: off
		{[]string{"--plan.file=" + planFixture}, true},                         // the file alone turns it on
		{[]string{"--plan.file=" + planFixture, "--no-collector.plan"}, false}, // an explicit no wins
		{[]string{"--plan.file=" + planFixture, "--collector.plan"}, true},
		{[]string{"--collector.plan"}, true}, // on, and refused at Build
	} {
		if on := slices.Contains(selection(t, tc.args...).Enabled(), "plan"); on != tc.on {
			t.Errorf("%v: plan enabled %v, want %v", tc.args, on, tc.on)
		}
	}
}

func TestPlanCollectorRefusesBadConfiguration(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "plans.yml")
	if err := os.WriteFile(bad, []byte("- name: a\n  model-size: 70B\n  method: qlora\n  dtype: bf16\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--collector.plan"}, "collector plan: needs --plan.file"},
		{[]string{"--plan.file=" + bad}, "collector plan: --plan.file: plan 1 (line 4): dtype: qlora quantizes the base to nf4"},
		{[]string{"--plan.file=" + filepath.Join(dir, "missing.yml")}, "collector plan: --plan.file: cannot read the file: no such file or directory"},
	} {
		e, err := selection(t, tc.args...).Build(testEnv())
		if err == nil {
			e.Close()
			t.Errorf("%v: built", tc.args)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), dir) {
			t.Errorf("%v: error %q, want %q and no path", tc.args, err, tc.want)
		}
	}
}
