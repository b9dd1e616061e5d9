package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-jsonnet"
	"go.yaml.in/yaml/v3"
)

// repoRoot holds mixin.libsonnet and the files it reads.
const repoRoot = "../.."

// mixinOutput is what kube-prometheus reads of the mixin.
type mixinOutput struct {
	Alerts     ruleFile       `json:"alerts"`
	Rules      ruleFile       `json:"rules"`
	Dashboards map[string]any `json:"dashboards"`
}

type ruleFile struct {
	Groups []ruleGroup `json:"groups" yaml:"groups"`
}

type ruleGroup struct {
	Name  string           `json:"name" yaml:"name"`
	Rules []map[string]any `json:"rules" yaml:"rules"`
}

// evalMixin evaluates mixin.libsonnet with go-jsonnet, config (jsonnet)
// merged into its _config.
func evalMixin(t *testing.T, config string) mixinOutput {
	t.Helper()
	vm := jsonnet.MakeVM()
	vm.Importer(&jsonnet.FileImporter{JPaths: []string{repoRoot}})
	snippet := `local m = (import 'mixin.libsonnet') + { _config+:: ` + config + ` };
{ alerts: m.prometheusAlerts, rules: m.prometheusRules, dashboards: m.grafanaDashboards }`
	out, err := vm.EvaluateAnonymousSnippet("mixin_test.jsonnet", snippet)
	if err != nil {
		t.Fatalf("mixin.libsonnet: %v", err)
	}
	var m mixinOutput
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// shippedRules is rules/spark.rules.yml, as JSON values.
func shippedRules(t *testing.T) ruleFile {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "rules", "spark.rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var f ruleFile
	if err := yaml.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	return normalize(t, f)
}

// normalize gives a value the types JSON decoding gives (float64 numbers,
// map[string]any), so YAML and jsonnet output compare equal when equal.
func normalize[T any](t *testing.T, v T) T {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out T
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func hasAlert(g ruleGroup) bool {
	for _, r := range g.Rules {
		if _, ok := r["alert"]; ok {
			return true
		}
	}
	return false
}

// With the default _config the mixin is the shipped files: its alert and
// rule groups together are rules/spark.rules.yml group for group, its
// dashboards dashboards/*.json.
func TestMixinIsTheShippedFiles(t *testing.T) {
	m := evalMixin(t, "{}")
	want := shippedRules(t)
	got := map[string]ruleGroup{}
	for _, g := range m.Alerts.Groups {
		if !hasAlert(g) {
			t.Errorf("prometheusAlerts group %s has no alert", g.Name)
		}
		got[g.Name] = g
	}
	for _, g := range m.Rules.Groups {
		if hasAlert(g) {
			t.Errorf("prometheusRules group %s has an alert", g.Name)
		}
		if _, dup := got[g.Name]; dup {
			t.Errorf("group %s is in both prometheusAlerts and prometheusRules", g.Name)
		}
		got[g.Name] = g
	}
	if len(got) != len(want.Groups) {
		t.Errorf("the mixin has %d rule groups, rules/spark.rules.yml %d", len(got), len(want.Groups))
	}
	for _, w := range want.Groups {
		if g, ok := got[w.Name]; !ok {
			t.Errorf("group %s of rules/spark.rules.yml is missing from the mixin", w.Name)
		} else if !reflect.DeepEqual(g, w) {
			t.Errorf("group %s differs from rules/spark.rules.yml", w.Name)
		}
	}

	files, _ := filepath.Glob(filepath.Join(repoRoot, "dashboards", "*.json"))
	if len(m.Dashboards) != len(files) {
		t.Errorf("the mixin has %d dashboards, dashboards/ %d", len(m.Dashboards), len(files))
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var want any
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(m.Dashboards[filepath.Base(f)], want) {
			t.Errorf("the mixin's %s differs from dashboards/%s", filepath.Base(f), filepath.Base(f))
		}
	}
}

// sparkSelector is a spark_* metric selector outside quotes, with its
// matchers if it has some: what a job selector must reach.
var sparkSelector = regexp.MustCompile(`(?:^|[^a-zA-Z0-9_:"])(spark_[a-zA-Z0-9_]+)\s*(\{[^}]*\})?`)

// A job selector reaches every selector of an exported metric and changes
// nothing else; the runbook URL reaches every alert's link.
func TestMixinConfig(t *testing.T) {
	const job, url = `job="gpu-hosts"`, "https://wiki.example/spark/runbooks"
	m := evalMixin(t, `{ sparkSelector: '`+job+`', runbookURL: '`+url+`' }`)
	plain := evalMixin(t, "{}")

	checkExpr := func(where, got, orig string) {
		t.Helper()
		sels := sparkSelector.FindAllStringSubmatch(got, -1)
		for _, s := range sels {
			if !strings.Contains(s[2], job) {
				t.Errorf("%s: %s without %s: %s", where, s[1], job, got)
			}
		}
		undone := strings.NewReplacer("{"+job+", ", "{", "{"+job+"}", "").Replace(got)
		if undone != orig {
			t.Errorf("%s: more changed than the selector:\n%s\nwas\n%s", where, got, orig)
		}
		if len(sels) > 0 && got == orig {
			t.Errorf("%s: unchanged: %s", where, got)
		}
	}

	all := func(f mixinOutput) []ruleGroup {
		return append(append([]ruleGroup{}, f.Alerts.Groups...), f.Rules.Groups...)
	}
	orig := map[string]ruleGroup{}
	for _, g := range all(plain) {
		orig[g.Name] = g
	}
	var rewritten int
	var rules ruleFile
	for _, g := range all(m) {
		rules.Groups = append(rules.Groups, g)
		for i, r := range g.Rules {
			expr, _ := r["expr"].(string)
			before, _ := orig[g.Name].Rules[i]["expr"].(string)
			checkExpr("group "+g.Name, expr, before)
			if expr != before {
				rewritten++
			}
			if r["record"] == "spark:runbooks:info" {
				if base := r["labels"].(map[string]any)["base_url"]; base != url {
					t.Errorf("runbook base_url %v, want %s", base, url)
				}
			}
		}
	}
	if rewritten == 0 {
		t.Error("the job selector changed no rule")
	}

	var exprs int
	for name, d := range m.Dashboards {
		walkStrings(d, plain.Dashboards[name], func(key, got, orig string) {
			if key == "expr" || key == "definition" || key == "query" {
				exprs++
				checkExpr(name+" "+key, got, orig)
			} else if got != orig {
				t.Errorf("%s: %s changed: %q, was %q", name, key, got, orig)
			}
		})
	}
	if exprs == 0 {
		t.Error("no dashboard query was seen")
	}

	// The rewritten rules still load in Prometheus, where promtool is at
	// hand (make test builds it; CI requires it).
	promtool, err := exec.LookPath(filepath.Join(repoRoot, ".build", "tools", "promtool"))
	if err != nil {
		if os.Getenv("SPARK_REQUIRE_TOOLS") != "" {
			t.Fatal("promtool not built: run make tools")
		}
		t.Log("promtool not built: the rewritten rules were not loaded")
		return
	}
	data, _ := yaml.Marshal(rules)
	path := filepath.Join(t.TempDir(), "rules.yml")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "rules", path).CombinedOutput(); err != nil {
		t.Errorf("promtool check rules on the mixin's rules with %s: %v\n%s", job, err, out)
	}
}

// The usable-memory tiers follow _config; every other rule stays as shipped.
func TestMixinUsableTiers(t *testing.T) {
	m := evalMixin(t, `{ poolUsableLowGiB: 16, poolUsableCriticalGiB: 9.5 }`)
	plain := evalMixin(t, "{}")
	want := map[string]string{
		"SparkPoolUsableLow":      "spark_pool_usable_bytes < 16 * 1024^3",
		"SparkPoolUsableCritical": "spark_pool_usable_bytes < 9.5 * 1024^3",
	}
	seen := 0
	for gi, g := range m.Alerts.Groups {
		for i, r := range g.Rules {
			name, _ := r["alert"].(string)
			expr := r["expr"]
			if w, ok := want[name]; ok {
				seen++
				if expr != w {
					t.Errorf("%s: expr %q, want %q", name, expr, w)
				}
			} else if was := plain.Alerts.Groups[gi].Rules[i]["expr"]; expr != was {
				t.Errorf("%s: expr changed by the tiers: %q, was %q", name, expr, was)
			}
		}
	}
	if seen != len(want) {
		t.Errorf("saw %d of the %d tier alerts", seen, len(want))
	}
}

// walkStrings calls f on every string of got beside the same place in orig.
func walkStrings(got, orig any, f func(key, got, orig string)) {
	var walk func(key string, g, o any)
	walk = func(key string, g, o any) {
		switch g := g.(type) {
		case map[string]any:
			om, _ := o.(map[string]any)
			for k, v := range g {
				walk(k, v, om[k])
			}
		case []any:
			oa, _ := o.([]any)
			for i, v := range g {
				if i < len(oa) {
					walk(key, v, oa[i])
				}
			}
		case string:
			was, _ := o.(string)
			f(key, g, was)
		}
	}
	walk("", got, orig)
}
