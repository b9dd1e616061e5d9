package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/spark-exporter/spark_exporter/internal/plan"
	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
)

// runPlan runs `spark_exporter plan args…`: in-process, or as the binary
// named by SPARK_TEST_BINARY (`make test-arm64` checks the arm64 build
// prints the same reports).
func runPlan(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errs bytes.Buffer
	args = append([]string{"plan"}, args...)
	if os.Getenv("SPARK_TEST_BINARY") == "" {
		code = run(args, &out, &errs)
		return code, out.String(), errs.String()
	}
	cmd := testexporter.Command(t, args...)
	cmd.Stdout, cmd.Stderr = &out, &errs
	if err := cmd.Run(); err != nil && cmd.ProcessState == nil {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errs.String()
}

// The report as a user sees it, on the fixture pools. Rewrite with
// go test ./cmd/spark_exporter -run Golden -update.
func TestGoldenPlan(t *testing.T) {
	for _, tc := range []struct {
		golden string
		tree   string
		args   []string
		code   int
	}{
		// Mid-run Spark: 70 GB at load, 40 GB after a flush: nothing on the
		// ladder fits beside what is running.
		{"plan-70b-qlora-spark.txt", "spark", []string{"--model-size=70B", "--method=qlora", "--optimizer=adamw-8bit",
			"--gradient-checkpointing", "--layers=80", "--hidden-size=8192"}, 1},
		{"plan-70b-qlora-spark.json", "spark", []string{"--model-size=70B", "--method=qlora", "--optimizer=adamw-8bit",
			"--gradient-checkpointing", "--layers=80", "--hidden-size=8192", "--json"}, 1},
		// Idle Spark: fp32 AdamW states without checkpointing do not fit;
		// halving the pack (step 2) after a flush (step 1) does.
		{"plan-9b-full-idle.txt", "idle", []string{"--model-size=9B", "--method=full", "--optimizer=adamw"}, 1},
		// Mid-run Spark: an 8B LoRA fits once the page cache is flushed.
		{"plan-8b-lora-spark.json", "spark", []string{"--model-size=8B", "--method=lora", "--gradient-checkpointing",
			"--layers=32", "--hidden-size=4096", "--json"}, 0},
		// Beside an inference server: down to QLoRA, after a flush.
		{"plan-8b-lora-tight.txt", "tight", []string{"--model-size=8B", "--method=lora", "--gradient-checkpointing",
			"--layers=32", "--hidden-size=4096", "--lora-rank=64",
			"--lora-targets=4096x4096,4096x1024,4096x1024,4096x4096,4096x14336,4096x14336,14336x4096"}, 1},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			code, stdout, stderr := runPlan(t, append(tc.args, "--path.procfs="+fixtureDir(t, tc.tree))...)
			if code != tc.code {
				t.Errorf("exit %d, want %d; stderr: %s", code, tc.code, stderr)
			}
			if stderr != "" {
				t.Errorf("stderr: %s", stderr)
			}
			golden(t, tc.golden, stdout)
		})
	}
}

// planJSON runs the plan command with --json and decodes its report.
func planJSON(t *testing.T, args ...string) (int, map[string]any) {
	t.Helper()
	code, stdout, stderr := runPlan(t, append(args, "--json")...)
	var r map[string]any
	if err := json.Unmarshal([]byte(stdout), &r); err != nil {
		t.Fatalf("not JSON (%v): %s\nstderr: %s", err, stdout, stderr)
	}
	return code, r
}

func TestPlanJSONShape(t *testing.T) {
	code, r := planJSON(t, "--model-size=70B", "--method=qlora", "--gradient-checkpointing", "--path.procfs="+fixtureDir(t, "idle"))
	if code != 0 || r["verdict"] != "ready" {
		t.Errorf("exit %d verdict %v, want 0 ready", code, r["verdict"])
	}
	// The env-report.json fields, and the estimate docs/plan.md lists.
	for _, k := range []string{"platform", "checks", "headroom_gb", "verdict", "estimate"} {
		if _, ok := r[k]; !ok {
			t.Errorf("no %q in the report", k)
		}
	}
	est, _ := r["estimate"].(map[string]any)
	for _, k := range []string{"weights_gb", "optimizer_gb", "gradients_gb", "adapters_gb", "activations_gb", "steady_gb", "peak_gb"} {
		if _, ok := est[k].(float64); !ok {
			t.Errorf("estimate.%s missing or not a number: %v", k, est[k])
		}
	}
	checks, _ := r["checks"].(map[string]any)
	values := regexp.MustCompile(`^(pass|fail|warn: .+|skip: .+|info: .+)$`)
	for name, v := range checks {
		if s, _ := v.(string); !values.MatchString(s) {
			t.Errorf("check %s = %q: not pass, fail or level: detail", name, v)
		}
	}
}

func TestPlanUsesThePoolReserve(t *testing.T) {
	// idle: MemFree 114843648 kB = 117,599,895,552 B.
	const free = 117599895552.0
	for reserve, want := range map[string]float64{"4GiB": free - 4<<30, "16GiB": free - 16<<30} {
		_, r := planJSON(t, "--model-size=8B", "--method=qlora", "--pool.reserve="+reserve, "--path.procfs="+fixtureDir(t, "idle"))
		if got, _ := r["headroom_gb"].(float64); math.Abs(got-want/1e9) > 0.005 {
			t.Errorf("--pool.reserve=%s: headroom_gb %v, want %.2f", reserve, got, want/1e9)
		}
	}
}

func TestPlanUnreadablePool(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "not-proc")
	code, r := planJSON(t, "--model-size=8B", "--method=qlora", "--path.procfs="+dir)
	if code != 1 || r["verdict"] != "blocked" {
		t.Errorf("exit %d verdict %v, want 1 blocked", code, r["verdict"])
	}
	if _, ok := r["headroom_gb"]; ok {
		t.Errorf("headroom_gb %v reported without a pool", r["headroom_gb"])
	}
	checks, _ := r["checks"].(map[string]any)
	details, _ := r["details"].(map[string]any)
	why, _ := details["pool"].(string)
	if checks["pool"] != "fail" || !strings.Contains(why, "no such file") || strings.Contains(why, "not-proc") {
		t.Errorf("pool check %q (%q): want a failure, said without the path", checks["pool"], why)
	}
}

func TestPlanBadInputExitsTwoNamingTheFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--method=lora"}, "'--model-size' not provided"},
		{[]string{"--model-size=70B"}, "'--method' not provided"},
		{[]string{"--model-size=-70B", "--method=lora"}, "flag --model-size: must be between 1M and 10T"},
		{[]string{"--model-size=1e30", "--method=lora"}, "flag --model-size: must be between"},
		{[]string{"--model-size=seventy", "--method=lora"}, "flag --model-size: not a parameter count"},
		{[]string{"--model-size=70B", "--method=dpo"}, "flag --method: must be one of full, lora, qlora"},
		{[]string{"--model-size=70B", "--method=lora", "--dtype=fp8"}, "flag --dtype: must be one of"},
		{[]string{"--model-size=70B", "--method=lora", "--optimizer=lion"}, "flag --optimizer: must be one of"},
		{[]string{"--model-size=70B", "--method=qlora", "--dtype=bf16"}, "flag --dtype: qlora quantizes the base to nf4"},
		{[]string{"--model-size=9B", "--method=full", "--dtype=nf4"}, "flag --dtype: nf4 weights cannot be trained"},
		{[]string{"--model-size=9B", "--method=full", "--lora-rank=16"}, "flag --lora-rank: only applies"},
		{[]string{"--model-size=9B", "--method=lora", "--lora-rank=0"}, "flag --lora-rank: must be between"},
		{[]string{"--model-size=9B", "--method=lora", "--pack=-1"}, "flag --pack: must be between"},
		{[]string{"--model-size=9B", "--method=lora", "--batch=1e9"}, "flag --batch: not a whole number"},
		{[]string{"--model-size=9B", "--method=lora", "--layers=40"}, "flag --hidden-size: needed with layers"},
		{[]string{"--model-size=9B", "--method=lora", "--lora-targets=4096"}, "flag --lora-targets: not a list"},
		{[]string{"--model-size=9B", "--method=lora", "--lora-targets=4096x4096"}, "flag --lora-targets: need layers"},
		{[]string{"--model-size=9B", "--method=lora", "--pool.reserve=lots"}, "flag --pool.reserve"},
	} {
		code, stdout, stderr := runPlan(t, tc.args...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2", tc.args, code)
		}
		if !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: stderr %q, want %q", tc.args, stderr, tc.want)
		}
		if stdout != "" {
			t.Errorf("%v: a report despite bad input: %s", tc.args, stdout)
		}
	}
}

// The served exporter exports the plan file's runs beside the pool.
func TestServePlanFile(t *testing.T) {
	plans := filepath.Join(testexporter.Root(t), "testdata", "plans", "spark.yml")
	p := testexporter.Start(t, nil, "--path.procfs="+fixtureDir(t, "spark"), "--plan.file="+plans)
	metrics := p.Get(t, "/metrics")
	for _, want := range []string{
		`spark_plan_required_bytes{plan="llama-3.1-70b-qlora"} 7e+10`,
		`spark_plan_required_bytes{plan="gemma-2-27b-lora"} 1.08e+11`,
		`spark_plan_required_bytes{plan="gemma-2-9b-full"} `,
		`spark_scrape_collector_success{collector="plan"} 1`,
		// The alert compares with this; both come from one scrape.
		`spark_pool_headroom_after_flush_bytes 4.0243843072e+10`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if !strings.Contains(p.Logs(), `collector=plan`) {
		t.Errorf("plan collector not logged as enabled:\n%s", p.Logs())
	}
}

// A bad plan file stops the exporter at start, saying what is wrong with the
// file but neither its path nor its contents.
func TestServeRefusesBadPlanFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "private")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(dir, "plans.yml")
	if err := os.WriteFile(bad, []byte("- name: a\n  model-size: 70B\n  method: qlora\n  api-key: sk-live-123\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, testexporter.Binary(t), "--web.listen-address=127.0.0.1:0", "--plan.file="+bad)
	out, err := cmd.CombinedOutput()
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 1 {
		t.Fatalf("exit %v (%v), want 1:\n%s", cmd.ProcessState, err, out)
	}
	log := string(out)
	if !strings.Contains(log, "line 4, column 3: unknown field") || strings.Contains(log, "api-key") {
		t.Errorf("log does not say what is wrong:\n%s", log)
	}
	if strings.Contains(log, "sk-live-123") || strings.Contains(log, "private") {
		t.Errorf("log repeats the file's contents or path:\n%s", log)
	}
}

// Every field of the plan table parses the same as a flag of the plan
// command and as a key of --plan.file, and each is taken in both: a plan
// given every field differs from one without any one of them.
func TestPlanFieldsParseAsFlagsAndKeys(t *testing.T) {
	// One valid plan that sets every field away from its default.
	examples := map[string]string{
		"model-size": "8B", "method": "lora", "dtype": "fp16", "optimizer": "sgd",
		"lora-rank": "8", "lora-targets": "4096x4096,4096x1024", "gradient-checkpointing": "true",
		"pack": "1024", "batch": "2", "layers": "32", "hidden-size": "4096",
	}
	viaFlags := func(skip string) plan.Plan {
		t.Helper()
		app := kingpin.New(name, "")
		p := planFlags(app.Command("plan", ""))
		args := []string{"plan"}
		for _, f := range plan.Fields {
			v, ok := examples[f.Name]
			switch {
			case !ok:
				t.Fatalf("field %s has no example here", f.Name)
			case f.Name == skip:
			case f.Switch:
				args = append(args, "--"+f.Name)
			default:
				args = append(args, "--"+f.Name+"="+v)
			}
		}
		if _, err := app.Parse(args); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		c, err := p.Complete()
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		return c
	}
	viaFile := func(skip string) plan.Plan {
		t.Helper()
		var b strings.Builder
		b.WriteString("- name: every-field\n")
		for _, f := range plan.Fields {
			if f.Name != skip {
				b.WriteString("  " + f.Name + ": " + examples[f.Name] + "\n")
			}
		}
		plans, err := plan.ParseFile([]byte(b.String()))
		if err != nil {
			t.Fatalf("%s: %v", b.String(), err)
		}
		return plans[0].Plan
	}
	all := viaFlags("")
	if file := viaFile(""); !reflect.DeepEqual(all, file) {
		t.Errorf("flags give %+v, the file %+v", all, file)
	}
	for _, f := range plan.Fields {
		if f.Required || f.Name == "layers" || f.Name == "hidden-size" {
			continue // the plan is refused without it; TestBadFiles covers that
		}
		if reflect.DeepEqual(viaFlags(f.Name), all) {
			t.Errorf("--%s: the plan is the same without it", f.Name)
		}
		if reflect.DeepEqual(viaFile(f.Name), all) {
			t.Errorf("key %s: the plan is the same without it", f.Name)
		}
	}
}
