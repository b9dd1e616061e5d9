// Package rules_test checks the shipped Prometheus rules (spark.rules.yml)
// against the exporter's contract, the runbooks and the exporter's real
// output, and runs their promtool unit tests (tests/*.test.yml).
package rules_test

import (
	"bytes"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/spark-exporter/spark_exporter/internal/testing/mdanchor"
	"github.com/spark-exporter/spark_exporter/internal/testing/promqltest"
	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
)

const (
	rulesFile    = "spark.rules.yml"
	runbooksFile = "../docs/runbooks.md"
	testsGlob    = "tests/*.test.yml"
)

// alertsFile holds the table of alerts, the interface users route on: its
// names and severities are checked against the rules file both ways.
const alertsFile = "../docs/alerts.md"

// alertRow is a row of alertsFile's table: | [`Name`](runbooks.md#name) | severity | fires when |;
// an alert whose rules set one severity or another by what fired (an Xid
// code) names both: critical/warning.
var alertRow = regexp.MustCompile("^\\| \\[`(Spark[A-Za-z0-9]+)`\\]\\(runbooks\\.md#([a-z0-9-]+)\\) \\| ([a-z]+(?:/[a-z]+)?) \\| .+ \\|$")

// documentedAlerts is alertsFile's table: each alert's severity, by name.
func documentedAlerts(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile(alertsFile)
	if err != nil {
		t.Fatal(err)
	}
	alerts := map[string]string{}
	for i, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "| [`Spark") {
			continue
		}
		m := alertRow.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("%s:%d: an alert row not of the form | [`Name`](runbooks.md#name) | severity | fires when |", alertsFile, i+1)
		}
		if m[2] != strings.ToLower(m[1]) {
			t.Errorf("%s:%d: %s links to runbooks.md#%s", alertsFile, i+1, m[1], m[2])
		}
		if _, dup := alerts[m[1]]; dup {
			t.Errorf("%s:%d: %s listed twice", alertsFile, i+1, m[1])
		}
		alerts[m[1]] = m[3]
	}
	if len(alerts) == 0 {
		t.Fatalf("%s: no alert table", alertsFile)
	}
	return alerts
}

type ruleFile struct {
	Groups []ruleGroup `yaml:"groups"`
}

type ruleGroup struct {
	Name     string `yaml:"name"`
	Interval string `yaml:"interval"`
	Rules    []rule `yaml:"rules"`
}

type rule struct {
	Record      string            `yaml:"record"`
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

func (r rule) name() string {
	if r.Alert != "" {
		return r.Alert
	}
	return r.Record
}

// decodeStrict decodes YAML rejecting unknown fields, so that a misspelt
// key ("anotations") is an error rather than a rule silently without it.
func decodeStrict(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func loadRules(t *testing.T) []rule {
	t.Helper()
	var f ruleFile
	decodeStrict(t, rulesFile, &f)
	var rules []rule
	for _, g := range f.Groups {
		rules = append(rules, g.Rules...)
	}
	if len(rules) == 0 {
		t.Fatalf("%s: no rules", rulesFile)
	}
	return rules
}

func alerts(rules []rule) []rule {
	var out []rule
	for _, r := range rules {
		if r.Alert != "" {
			out = append(out, r)
		}
	}
	return out
}

// The alerts of the rules file are those of docs/alerts.md, with the same
// severities.
func TestAlertsAreThoseOfDocsAlerts(t *testing.T) {
	documented := documentedAlerts(t)
	seen := map[string]bool{}
	for _, a := range alerts(loadRules(t)) {
		seen[a.Alert] = true
		want, ok := documented[a.Alert]
		if !ok {
			t.Errorf("alert %s of %s is not in %s's table: add its row (name, severity, fires when)", a.Alert, rulesFile, alertsFile)
			continue
		}
		if got := a.Labels["severity"]; !slices.Contains(strings.Split(want, "/"), got) {
			t.Errorf("alert %s: severity %q in %s, %q in %s", a.Alert, got, rulesFile, want, alertsFile)
		}
	}
	for name := range documented {
		if !seen[name] {
			t.Errorf("alert %s of %s is missing from %s", name, alertsFile, rulesFile)
		}
	}
}

// Every runbook_url is the shared base (the base_url label of the
// spark:runbooks:info rule, so a user changes it in one place) plus an
// anchor.
var runbookURL = regexp.MustCompile(`^\{\{ with query "spark:runbooks:info" \}\}\{\{ \. \| first \| label "base_url" \}\}\{\{ end \}\}#([a-z0-9_-]+)$`)

func TestAlertsHaveLabelsAndAnnotations(t *testing.T) {
	for _, a := range alerts(loadRules(t)) {
		switch a.Labels["severity"] {
		case "info", "warning", "critical":
		default:
			t.Errorf("alert %s: severity %q, want info, warning or critical", a.Alert, a.Labels["severity"])
		}
		for _, key := range []string{"summary", "description", "runbook_url"} {
			if strings.TrimSpace(a.Annotations[key]) == "" {
				t.Errorf("alert %s: no %s annotation", a.Alert, key)
			}
		}
		if u := a.Annotations["runbook_url"]; u != "" && !runbookURL.MatchString(u) {
			t.Errorf("alert %s: runbook_url %q is not the shared base plus an anchor", a.Alert, u)
		}
	}
}

func TestRecordingRuleNames(t *testing.T) {
	// level:metric:operations, as Prometheus' rule practices name them.
	name := regexp.MustCompile(`^[a-z][a-z0-9_]*:[a-z][a-z0-9_]*:[a-z][a-z0-9_]*$`)
	seen := map[string]bool{}
	for _, r := range loadRules(t) {
		if r.Record == "" {
			continue
		}
		if !name.MatchString(r.Record) {
			t.Errorf("recording rule %q is not named level:metric:operations", r.Record)
		}
		if seen[r.Record] {
			t.Errorf("recording rule %s defined twice", r.Record)
		}
		seen[r.Record] = true
	}
}

func TestRunbookAnchorsExist(t *testing.T) {
	runbooks, err := os.ReadFile(runbooksFile)
	if err != nil {
		t.Fatal(err)
	}
	anchors := mdanchor.Anchors(runbooks)
	for _, a := range alerts(loadRules(t)) {
		m := runbookURL.FindStringSubmatch(a.Annotations["runbook_url"])
		if m == nil {
			continue // reported by TestAlertsHaveLabelsAndAnnotations
		}
		if !anchors[m[1]] {
			t.Errorf("alert %s: runbook anchor #%s is not a heading of %s", a.Alert, m[1], runbooksFile)
		}
		if m[1] != strings.ToLower(a.Alert) {
			t.Errorf("alert %s: runbook anchor #%s, want its own section #%s", a.Alert, m[1], strings.ToLower(a.Alert))
		}
	}
}

// Queries inside annotation templates: the format given to printf and
// piped to query, or the string given to query, with each %q filled in by
// promqltest.AnyValue: a label value known
// only when the alert fires.
var templateQuery = regexp.MustCompile(`printf ("(?:[^"\\]|\\.)*")[^}]*\|\s*query|query ("(?:[^"\\]|\\.)*")`)

// annotationQueries lists the PromQL an annotation template runs.
func annotationQueries(text string) ([]string, error) {
	var out []string
	for _, m := range templateQuery.FindAllStringSubmatch(text, -1) {
		q, err := strconv.Unquote(m[1] + m[2]) // one of the two is empty
		if err != nil {
			return nil, err
		}
		out = append(out, strings.ReplaceAll(q, "%q", strconv.Quote(promqltest.AnyValue)))
	}
	return out, nil
}

func TestRulesReferenceRealMetrics(t *testing.T) {
	rules := loadRules(t)
	known := promqltest.LoadKnown(t)
	// Every expression and annotation query, parsed in one call of
	// Prometheus' own parser.
	type query struct {
		where       string
		expr        string
		isAlertExpr bool
	}
	var qs []query
	for _, r := range rules {
		qs = append(qs, query{r.name() + ": expr", r.Expr, r.Record == ""})
		for _, key := range slices.Sorted(maps.Keys(r.Annotations)) {
			more, err := annotationQueries(r.Annotations[key])
			if err != nil {
				t.Errorf("%s: annotation %s: %v", r.name(), key, err)
			}
			for _, q := range more {
				qs = append(qs, query{r.name() + ": annotation " + key, q, false})
			}
		}
	}
	exprs := make([]string, len(qs))
	for i, q := range qs {
		exprs[i] = q.expr
	}
	for i, res := range promqltest.Parse(t, exprs) {
		if res.Error != "" {
			t.Errorf("%s: %s", qs[i].where, res.Error)
			continue
		}
		if qs[i].isAlertExpr && len(res.Selectors) == 0 {
			t.Errorf("%s selects no metric", qs[i].where)
		}
		for _, sel := range res.Selectors {
			if err := known.Check(sel); err != nil {
				t.Errorf("%s: %v", qs[i].where, err)
			}
		}
	}
}

// The check above must catch what it is for: a misspelt metric, a
// misspelt label, a label value the exporter never gives, a recording rule
// that does not exist.
func TestCheckSelectorCatchesTypos(t *testing.T) {
	known := promqltest.Known{
		Exported: promqltest.Series{
			"spark_pool_free_bytes":                   {},
			"spark_pool_pressure_stall_seconds_total": {"kind": {"some": true, "full": true}},
		},
		Recorded: map[string]bool{"instance:spark_pool_refaults:rate5m": true},
	}
	cases := []struct {
		expr string
		ok   bool
	}{
		{`spark_pool_free_bytes`, true},
		{`spark_pool_free_bytes{instance="a", job="b"}`, true},
		{`rate(spark_pool_pressure_stall_seconds_total{kind="full"}[5m])`, true},
		{`rate(spark_pool_pressure_stall_seconds_total{kind=~"ful"}[5m])`, true}, // regexes are not checked
		{`spark_pool_pressure_stall_seconds_total{kind=` + strconv.Quote(promqltest.AnyValue) + `}`, true},
		{`instance:spark_pool_refaults:rate5m`, true},
		{`spark_pool_fre_bytes`, false},
		{`spark_pool_pressure_stall_seconds_total{knd="full"}`, false},
		{`spark_pool_pressure_stall_seconds_total{kind="ful"}`, false},
		{`instance:spark_pool_refault:rate5m`, false},
		{`node_memory_MemFree_bytes`, false},
	}
	exprs := make([]string, len(cases))
	for i, tc := range cases {
		exprs[i] = tc.expr
	}
	for i, res := range promqltest.Parse(t, exprs) {
		tc := cases[i]
		if res.Error != "" || len(res.Selectors) != 1 {
			t.Fatalf("%q parsed as %+v", tc.expr, res)
		}
		err := known.Check(res.Selectors[0])
		if (err == nil) != tc.ok {
			t.Errorf("Check(%q) = %v, want ok=%v", tc.expr, err, tc.ok)
		}
	}
}

// promtool unit test files, as far as this test reads them.
type promtoolTestFile struct {
	RuleFiles []string `yaml:"rule_files"`
	Tests     []struct {
		Name          string `yaml:"name"`
		AlertRuleTest []struct {
			Alertname string `yaml:"alertname"`
			ExpAlerts []any  `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
	} `yaml:"tests"`
}

func testFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(testsGlob)
	if err != nil || len(files) == 0 {
		t.Fatalf("no promtool test files %s: %v", testsGlob, err)
	}
	return files
}

func TestEveryAlertIsTestedBothWays(t *testing.T) {
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, file := range testFiles(t) {
		var f promtoolTestFile
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(data, &f); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if !slices.Contains(f.RuleFiles, "../"+rulesFile) {
			t.Errorf("%s: does not load ../%s", file, rulesFile)
		}
		for _, tc := range f.Tests {
			for _, art := range tc.AlertRuleTest {
				if len(art.ExpAlerts) > 0 {
					fires[art.Alertname] = true
				} else {
					silent[art.Alertname] = true
				}
			}
		}
	}
	for name := range documentedAlerts(t) {
		if !fires[name] {
			t.Errorf("no promtool test where %s fires", name)
		}
		if !silent[name] {
			t.Errorf("no promtool test where %s stays silent", name)
		}
	}
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
}

// Prometheus 3's promtool, from the tools module: the rules load, and
// their unit tests pass.
func TestPromtool(t *testing.T) {
	promtool := testexporter.Tool(t, "promtool")
	run(t, promtool, "check", "rules", rulesFile)
	run(t, promtool, append([]string{"test", "rules"}, testFiles(t)...)...)
}

// The rules also load in the Prometheus 2.42 of Debian 12, so they keep out
// of Prometheus-3-only syntax: $SPARK_PROMTOOL2, else the promtool `make deps`
// unpacks from Debian's prometheus package into .build/debian, else
// /usr/bin/promtool. CI sets SPARK_REQUIRE_PACKAGES=1, where a missing one
// fails; elsewhere the test is skipped.
func TestRulesLoadInPrometheus2(t *testing.T) {
	promtool := os.Getenv("SPARK_PROMTOOL2")
	if promtool == "" {
		promtool = filepath.Join(testexporter.Root(t), ".build", "debian", "usr", "bin", "promtool")
		if _, err := os.Stat(promtool); err != nil {
			promtool = "/usr/bin/promtool"
		}
	}
	version, err := exec.Command(promtool, "--version").CombinedOutput()
	if err != nil {
		const install = "`make deps` unpacks Debian's into .build/debian"
		if os.Getenv("SPARK_REQUIRE_PACKAGES") == "1" {
			t.Fatalf("no Prometheus 2 promtool: %v (%s)", err, install)
		}
		t.Skipf("no Prometheus 2 promtool: SKIPPED; %s: %v", install, err)
	}
	if !regexp.MustCompile(`version 2\.`).Match(version) {
		t.Fatalf("%s is not Prometheus 2:\n%s", promtool, version)
	}
	run(t, promtool, "check", "rules", rulesFile)
}

// The inhibitions recommended in docs/runbooks.md are valid Alertmanager
// configuration and name real alerts.
func TestRecommendedInhibitions(t *testing.T) {
	data, err := os.ReadFile(runbooksFile)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "## Recommended inhibitions")
	if !ok {
		t.Fatalf("%s: no Recommended inhibitions section", runbooksFile)
	}
	_, block, ok := strings.Cut(section, "```yaml\n")
	if ok {
		block, _, ok = strings.Cut(block, "```")
	}
	if !ok {
		t.Fatalf("%s: no yaml block in Recommended inhibitions", runbooksFile)
	}

	// Every alert name the matchers mention exists.
	names := regexp.MustCompile(`Spark[A-Za-z]+`).FindAllString(block, -1)
	if len(names) == 0 {
		t.Fatal("the inhibitions name no alert")
	}
	documented := documentedAlerts(t)
	for _, n := range names {
		if _, ok := documented[n]; !ok {
			t.Errorf("inhibition names %s, which is not an alert", n)
		}
	}

	amtool := testexporter.Tool(t, "amtool")
	config := "route:\n  receiver: none\nreceivers:\n  - name: none\n" + block
	path := filepath.Join(t.TempDir(), "alertmanager.yml")
	if err := os.WriteFile(path, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, amtool, "check-config", path)
}
