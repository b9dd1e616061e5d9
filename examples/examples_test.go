// Package examples holds deployment examples; its tests load them with the
// real tools (promtool, amtool, Alertmanager, systemd-analyze) and check that
// the pieces name each other consistently.
package examples

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/spark-exporter/spark_exporter/internal/testing/kuberules"
	"github.com/spark-exporter/spark_exporter/internal/testing/promqltest"
	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
)

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Errorf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
}

// stageRules lays out dir as docker-compose.yml does for Prometheus: the
// configuration file with the repository's rules/*.yml in rules/ beside it.
func stageRules(t *testing.T, dir string) {
	t.Helper()
	files, err := kuberules.ReadDir(filepath.Join(testexporter.Root(t), "rules"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "rules"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, "rules", f.Name), f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

type promConfig struct {
	RuleFiles []string `yaml:"rule_files"`
	Alerting  struct {
		Alertmanagers []struct {
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"alertmanagers"`
	} `yaml:"alerting"`
	ScrapeConfigs []struct {
		JobName       string `yaml:"job_name"`
		StaticConfigs []struct {
			Targets []string          `yaml:"targets"`
			Labels  map[string]string `yaml:"labels"`
		} `yaml:"static_configs"`
	} `yaml:"scrape_configs"`
}

// Both Prometheus examples load (rules included) and scrape the exporter
// as job "spark" on its port, with rules and Alertmanager wired.
func TestPrometheusConfigs(t *testing.T) {
	promtool := testexporter.Tool(t, "promtool")
	for _, name := range []string{"prometheus.yml", "prometheus-cluster.yml"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			stageRules(t, dir)
			data, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			cfg := filepath.Join(dir, name)
			if err := os.WriteFile(cfg, data, 0o644); err != nil {
				t.Fatal(err)
			}
			run(t, promtool, "check", "config", cfg)

			var c promConfig
			readYAML(t, name, &c)
			if len(c.RuleFiles) != 1 || c.RuleFiles[0] != "rules/*.yml" {
				t.Errorf("rule_files %v, want [rules/*.yml]", c.RuleFiles)
			}
			if len(c.Alerting.Alertmanagers) == 0 {
				t.Error("no Alertmanager configured")
			}
			spark := 0
			for _, sc := range c.ScrapeConfigs {
				if sc.JobName != "spark" {
					continue
				}
				for _, st := range sc.StaticConfigs {
					for _, target := range st.Targets {
						spark++
						if !strings.HasSuffix(target, ":10240") {
							t.Errorf("target %s is not on the exporter's port 10240", target)
						}
					}
				}
			}
			if spark == 0 {
				t.Error("no target in a job named spark")
			}
		})
	}
}

func TestAlertmanagerConfig(t *testing.T) {
	amtool := testexporter.Tool(t, "amtool")
	run(t, amtool, "check-config", "alertmanager.yml")

	// Warning and critical page; info and anything unlabelled stay quiet.
	for _, tc := range []struct {
		labels   []string
		receiver string
	}{
		{[]string{"alertname=SparkOOMKill", "severity=critical"}, "page"},
		{[]string{"alertname=SparkGPUThrottling", "severity=warning"}, "page"},
		{[]string{"alertname=SparkGPUPowerPlateau", "severity=info"}, "quiet"},
		{[]string{"alertname=SparkPageCacheHoldingHeadroom", "severity=info"}, "quiet"},
		{[]string{"alertname=Unlabelled"}, "quiet"},
	} {
		args := append([]string{"config", "routes", "test", "--config.file=alertmanager.yml",
			"--verify.receivers=" + tc.receiver}, tc.labels...)
		if out, err := exec.Command(amtool, args...).CombinedOutput(); err != nil {
			t.Errorf("%v: want receiver %s: %v\n%s", tc.labels, tc.receiver, err, out)
		}
	}
}

type alertmanagerConfig struct {
	InhibitRules []struct {
		SourceMatchers []string `yaml:"source_matchers"`
		TargetMatchers []string `yaml:"target_matchers"`
	} `yaml:"inhibit_rules"`
}

// The inhibitions name alerts the rules define (checked once rules/ has
// alerts; until then the names are those of docs/metrics.md).
func TestAlertmanagerNamesRuleAlerts(t *testing.T) {
	alerts := map[string]bool{}
	files, err := kuberules.ReadDir(filepath.Join(testexporter.Root(t), "rules"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		var rf promqltest.RuleFile
		if err := yaml.Unmarshal(f.Data, &rf); err != nil {
			t.Fatalf("rules/%s: %v", f.Name, err)
		}
		for _, g := range rf.Groups {
			for _, r := range g.Rules {
				if r.Alert != "" {
					alerts[r.Alert] = true
				}
			}
		}
	}
	if len(alerts) == 0 {
		t.Skip("rules/ defines no alert yet")
	}
	var c alertmanagerConfig
	readYAML(t, "alertmanager.yml", &c)
	for _, r := range c.InhibitRules {
		for _, m := range append(r.SourceMatchers, r.TargetMatchers...) {
			value, ok := strings.CutPrefix(m, "alertname=~")
			if !ok {
				value, ok = strings.CutPrefix(m, "alertname=")
			}
			if !ok {
				continue
			}
			for _, name := range strings.Split(strings.Trim(value, `"`), "|") {
				if !alerts[name] {
					t.Errorf("alertmanager.yml inhibits %s, which rules/ does not define", name)
				}
			}
		}
	}
}

type postedAlert struct {
	Labels   map[string]string `json:"labels"`
	StartsAt time.Time         `json:"startsAt"`
	EndsAt   time.Time         `json:"endsAt"`
}

type gotAlert struct {
	Labels map[string]string `json:"labels"`
	Status struct {
		State string `json:"state"`
	} `json:"status"`
}

// The inhibitions do what alertmanager.yml says, in a real Alertmanager:
// each source silences its targets on the same Spark (and GPU) only.
func TestAlertmanagerInhibitions(t *testing.T) {
	bin := testexporter.Tool(t, "alertmanager")
	dir := t.TempDir()
	am := testexporter.StartProgram(t, bin, nil,
		"--config.file=alertmanager.yml",
		"--storage.path="+dir,
		"--web.listen-address=127.0.0.1:0",
		"--cluster.listen-address=") // no gossip: one local instance

	alert := func(name, severity, instance, gpu string) map[string]string {
		l := map[string]string{"alertname": name, "severity": severity, "instance": instance}
		if gpu != "" {
			l["gpu"] = gpu
		}
		return l
	}
	// Alerts posted, with the state each must reach.
	cases := []struct {
		labels map[string]string
		want   string
	}{
		{alert("SparkGPUPowerStuckLow", "warning", "a", "0"), "active"},
		{alert("SparkGPUPowerPlateau", "info", "a", "0"), "suppressed"},
		{alert("SparkGPUPowerPlateau", "info", "b", "0"), "active"}, // another Spark
		{alert("SparkGPUThrottling", "warning", "c", "0"), "active"},
		{alert("SparkGPUPowerPlateau", "info", "c", "0"), "suppressed"},
		{alert("SparkOOMKill", "critical", "d", ""), "active"},
		{alert("SparkMemoryEviction", "warning", "d", ""), "suppressed"},
		{alert("SparkPoolUsableCritical", "critical", "d", ""), "suppressed"},
		{alert("SparkPageCacheHoldingHeadroom", "info", "d", ""), "active"},
		{alert("SparkPoolUsableCritical", "critical", "e", ""), "active"}, // no OOM kill there
		{alert("SparkPoolUsableLow", "warning", "e", ""), "suppressed"},
		{alert("SparkPoolExhaustionImminent", "warning", "e", ""), "suppressed"},
		{alert("SparkPoolHeadroomLow", "info", "e", ""), "active"},
		{alert("SparkPageCacheHoldingHeadroom", "info", "e", ""), "active"},
		{alert("SparkPoolUsableLow", "warning", "f", ""), "active"},
		{alert("SparkPoolExhaustionImminent", "warning", "f", ""), "suppressed"},
	}
	now := time.Now()
	var posted []postedAlert
	want := map[string]string{}
	for _, c := range cases {
		posted = append(posted, postedAlert{c.labels, now, now.Add(time.Hour)})
		want[key(c.labels)] = c.want
	}
	body, err := json.Marshal(posted)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(am.URL+"/api/v2/alerts", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("posting alerts: %s", resp.Status)
	}

	var got map[string]string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); {
		got = states(t, am.Get(t, "/api/v2/alerts"))
		if equal(got, want) {
			return
		}
		time.Sleep(100 * time.Millisecond) // polling interval, not synchronisation
	}
	var keys []string
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if got[k] != want[k] {
			t.Errorf("%s: %q, want %q", k, got[k], want[k])
		}
	}
}

func key(labels map[string]string) string {
	return fmt.Sprintf("%s{instance=%s,gpu=%s}", labels["alertname"], labels["instance"], labels["gpu"])
}

func states(t *testing.T, body string) map[string]string {
	var alerts []gotAlert
	if err := json.Unmarshal([]byte(body), &alerts); err != nil {
		t.Fatalf("/api/v2/alerts: %v", err)
	}
	m := map[string]string{}
	for _, a := range alerts {
		m[key(a.Labels)] = a.Status.State
	}
	return m
}

func equal(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// Prometheus (rule_files: rules/*.yml), the PrometheusRule generator and
// the dashboard check all read rules/*.yml: a rule file named *.yaml would
// be left out of all three without a word.
func TestRuleFilesAreYml(t *testing.T) {
	stray, err := filepath.Glob(filepath.Join(testexporter.Root(t), "rules", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range stray {
		t.Errorf("rules/%s: name rule files *.yml, or Prometheus and the examples never load it", filepath.Base(f))
	}
}

// The PrometheusRule is generated from rules/ and equals what the generator
// makes of today's rules/*.yml; its groups load in promtool.
func TestPrometheusRuleMatchesRules(t *testing.T) {
	files, err := kuberules.ReadDir(filepath.Join(testexporter.Root(t), "rules"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := kuberules.PrometheusRule(files)
	if err != nil {
		t.Fatal(err)
	}
	const path = "kubernetes/prometheusrule.yaml"
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from rules/*.yml: run `make kubernetes-rules` and commit the result", path)
	}

	var pr struct {
		Spec yaml.Node `yaml:"spec"`
	}
	if err := yaml.Unmarshal(got, &pr); err != nil {
		t.Fatal(err)
	}
	spec, err := yaml.Marshal(&pr.Spec)
	if err != nil {
		t.Fatal(err)
	}
	rules := filepath.Join(t.TempDir(), "spec.yml")
	if err := os.WriteFile(rules, spec, 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, testexporter.Tool(t, "promtool"), "check", "rules", rules)
}

type compose struct {
	Services map[string]struct {
		Image       string            `yaml:"image"`
		PID         string            `yaml:"pid"`
		Command     []string          `yaml:"command"`
		Volumes     []string          `yaml:"volumes"`
		Environment map[string]string `yaml:"environment"`
		Build       struct {
			Context    string `yaml:"context"`
			Dockerfile string `yaml:"dockerfile"`
		} `yaml:"build"`
	} `yaml:"services"`
}

// docker-compose.yml, the Prometheus configuration and the Grafana
// provisioning name each other: every file mounted exists, Prometheus
// scrapes and alerts the services the stack runs, Grafana finds the
// dashboard and Prometheus where they are mounted.
func TestComposeStack(t *testing.T) {
	var c compose
	readYAML(t, "docker-compose.yml", &c)
	mounts := map[string]string{} // container path → repository path
	for name, s := range c.Services {
		for _, v := range s.Volumes {
			parts := strings.Split(v, ":")
			src := parts[0]
			if !strings.HasPrefix(src, ".") {
				continue // a named volume or a host path
			}
			// ../rules may be missing until the rules land (Docker then
			// mounts an empty directory); anything else must exist.
			if _, err := os.Stat(src); err != nil && src != "../rules" {
				t.Errorf("service %s mounts %s, which does not exist", name, src)
			}
			mounts[parts[1]] = filepath.Clean(src)
		}
	}

	exp, ok := c.Services["spark-exporter"]
	if !ok {
		t.Fatal("no spark-exporter service")
	}
	if exp.PID != "host" {
		t.Error("spark-exporter: pid: host is needed to see the workloads")
	}
	if exp.Environment["NVIDIA_DRIVER_CAPABILITIES"] != "utility" {
		t.Error("spark-exporter: NVIDIA_DRIVER_CAPABILITIES should be utility (NVML only)")
	}
	if !containsProcfs(exp.Command, exp.Volumes) {
		t.Errorf("spark-exporter: --path.procfs must point at the host's /proc mount: %v %v", exp.Command, exp.Volumes)
	}
	if _, err := os.Stat(filepath.Join(exp.Build.Context, exp.Build.Dockerfile)); err != nil {
		t.Errorf("spark-exporter builds from a missing Dockerfile: %v", err)
	}

	var p promConfig
	readYAML(t, "prometheus.yml", &p)
	for _, sc := range p.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			for _, target := range st.Targets {
				if _, ok := c.Services[strings.Split(target, ":")[0]]; !ok {
					t.Errorf("prometheus.yml scrapes %s, not a service of the stack", target)
				}
			}
		}
	}
	for _, am := range p.Alerting.Alertmanagers {
		for _, st := range am.StaticConfigs {
			for _, target := range st.Targets {
				if target != "alertmanager:9093" {
					t.Errorf("prometheus.yml alerts %s, want alertmanager:9093", target)
				}
			}
		}
	}
	if mounts["/etc/prometheus/rules"] != filepath.Join("..", "rules") {
		t.Errorf("Prometheus should mount ../rules at /etc/prometheus/rules (rules/*.yml beside its config), got %v", mounts)
	}

	var ds struct {
		Datasources []struct {
			Type string `yaml:"type"`
			URL  string `yaml:"url"`
		} `yaml:"datasources"`
	}
	readYAML(t, "grafana/provisioning/datasources/prometheus.yml", &ds)
	if len(ds.Datasources) != 1 || ds.Datasources[0].Type != "prometheus" || ds.Datasources[0].URL != "http://prometheus:9090" {
		t.Errorf("Grafana datasource %+v, want the stack's prometheus", ds.Datasources)
	}
	var prov struct {
		Providers []struct {
			Options struct {
				Path string `yaml:"path"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	readYAML(t, "grafana/provisioning/dashboards/spark.yml", &prov)
	if len(prov.Providers) != 1 || mounts[prov.Providers[0].Options.Path] != filepath.Join("..", "dashboards") {
		t.Errorf("Grafana's dashboard provider path is not where ../dashboards is mounted: %+v, mounts %v", prov.Providers, mounts)
	}
}

// containsProcfs reports whether args set --path.procfs to where a volume
// mounts the host's /proc.
func containsProcfs(args, volumes []string) bool {
	for _, v := range volumes {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 && parts[0] == "/proc" {
			for _, a := range args {
				if a == "--path.procfs="+parts[1] {
					return true
				}
			}
		}
	}
	return false
}

// Issue 28, item 13: the unit (and the Debian package's, made from it)
// restarts the exporter after any exit but a stop, a clean signal or exit
// 0 included, and not after a bad flag (exit 2).
func TestSystemdUnitRestartsOnAnyExit(t *testing.T) {
	data, err := os.ReadFile("systemd/spark_exporter.service")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	for _, want := range []string{"Restart=always", "RestartPreventExitStatus=2"} {
		if !slices.Contains(lines, want) {
			t.Errorf("the unit lacks %s", want)
		}
	}
}

// The exporter outlives the OOM killer: the unit (and the Debian package's,
// made from it; scripts/deb.sh checks the lines survive) exempts it from
// the OOM killer and bounds its memory, so that the exemption cannot cost
// the host's other processes (docs/design.md, "Budget with free").
func TestSystemdUnitOutlivesTheOOMKiller(t *testing.T) {
	data, err := os.ReadFile("systemd/spark_exporter.service")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	for _, want := range []string{"OOMScoreAdjust=-1000", "MemoryMax=256M"} {
		if !slices.Contains(lines, want) {
			t.Errorf("the unit lacks %s", want)
		}
	}
}

// The journal collector reads the system journal: the unit (and the
// Debian package's, made from it) adds the group journald gives it to.
func TestSystemdUnitReadsTheJournal(t *testing.T) {
	data, err := os.ReadFile("systemd/spark_exporter.service")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(strings.Split(string(data), "\n"), "SupplementaryGroups=systemd-journal") {
		t.Error("the unit lacks SupplementaryGroups=systemd-journal")
	}
}

// The systemd unit is valid and keeps its hardening: systemd-analyze's
// exposure at most 2.0 ("OK"; the /proc, /dev/nvidia* and network access it
// keeps are needed).
func TestSystemdUnit(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		const install = "apt-get install --no-install-recommends systemd"
		if os.Getenv("SPARK_REQUIRE_PACKAGES") == "1" {
			t.Fatal("systemd-analyze not installed: " + install)
		}
		t.Skip("systemd-analyze not installed: SKIPPED; " + install + " runs this test")
	}
	data, err := os.ReadFile("systemd/spark_exporter.service")
	if err != nil {
		t.Fatal(err)
	}
	// verify wants ExecStart's program to exist: point it at the one built.
	unit := strings.Replace(string(data), "/usr/local/bin/spark_exporter", testexporter.Binary(t), 1)
	if unit == string(data) {
		t.Fatal("ExecStart does not run /usr/local/bin/spark_exporter")
	}
	path := filepath.Join(t.TempDir(), "spark_exporter.service")
	if err := os.WriteFile(path, []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", "--man=no", path).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		// verify exits 0 on unknown keys: any message is a finding.
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	out, err = exec.Command(analyze, "security", "--offline=yes", "--threshold=20", path).CombinedOutput()
	if err != nil {
		t.Errorf("systemd-analyze security: exposure above 2.0: %v\n%s", err, out)
	}
}

type kube struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name      string            `yaml:"name"`
		Namespace string            `yaml:"namespace"`
		Labels    map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Spec yaml.Node `yaml:"spec"`
}

type daemonSetSpec struct {
	Selector struct {
		MatchLabels map[string]string `yaml:"matchLabels"`
	} `yaml:"selector"`
	Template struct {
		Metadata struct {
			Labels map[string]string `yaml:"labels"`
		} `yaml:"metadata"`
		Spec struct {
			RuntimeClassName string `yaml:"runtimeClassName"`
			HostPID          bool   `yaml:"hostPID"`
			SecurityContext  struct {
				RunAsNonRoot bool `yaml:"runAsNonRoot"`
			} `yaml:"securityContext"`
			Containers []struct {
				Image string   `yaml:"image"`
				Args  []string `yaml:"args"`
				Env   []struct {
					Name, Value string
				} `yaml:"env"`
				Ports []struct {
					Name          string `yaml:"name"`
					ContainerPort int    `yaml:"containerPort"`
				} `yaml:"ports"`
				SecurityContext struct {
					AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
					ReadOnlyRootFilesystem   bool  `yaml:"readOnlyRootFilesystem"`
				} `yaml:"securityContext"`
				VolumeMounts []struct {
					Name      string `yaml:"name"`
					MountPath string `yaml:"mountPath"`
					ReadOnly  bool   `yaml:"readOnly"`
				} `yaml:"volumeMounts"`
			} `yaml:"containers"`
			Volumes []struct {
				Name     string `yaml:"name"`
				HostPath struct {
					Path string `yaml:"path"`
				} `yaml:"hostPath"`
			} `yaml:"volumes"`
		} `yaml:"spec"`
	} `yaml:"template"`
}

type serviceSpec struct {
	Selector map[string]string `yaml:"selector"`
	Ports    []struct {
		Name       string `yaml:"name"`
		Port       int    `yaml:"port"`
		TargetPort string `yaml:"targetPort"`
	} `yaml:"ports"`
}

type serviceMonitorSpec struct {
	Selector struct {
		MatchLabels map[string]string `yaml:"matchLabels"`
	} `yaml:"selector"`
	Endpoints []struct {
		Port        string `yaml:"port"`
		Relabelings []struct {
			TargetLabel string `yaml:"targetLabel"`
			Replacement string `yaml:"replacement"`
		} `yaml:"relabelings"`
	} `yaml:"endpoints"`
}

func decodeSpec(t *testing.T, k kube, v any) {
	t.Helper()
	if err := k.Spec.Decode(v); err != nil {
		t.Fatalf("%s spec: %v", k.Kind, err)
	}
}

func subset(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// The Kubernetes manifests fit together: the kustomization lists them all,
// the DaemonSet runs the released image under the NVIDIA runtime with the
// host's /proc and PIDs, and Service and ServiceMonitor select it by the
// same labels and port name, as job "spark" like the other examples.
func TestKubernetesManifests(t *testing.T) {
	var kust struct {
		Resources []string `yaml:"resources"`
	}
	readYAML(t, "kubernetes/kustomization.yaml", &kust)
	files, err := filepath.Glob("kubernetes/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, r := range kust.Resources {
		listed[r] = true
	}
	objects := map[string]kube{}
	for _, f := range files {
		base := filepath.Base(f)
		if base == "kustomization.yaml" {
			continue
		}
		if !listed[base] {
			t.Errorf("kustomization.yaml does not list %s", base)
		}
		var k kube
		readYAML(t, f, &k)
		if k.Metadata.Namespace != "monitoring" {
			t.Errorf("%s: namespace %q, want monitoring like the others", base, k.Metadata.Namespace)
		}
		objects[k.Kind] = k
	}

	version, err := os.ReadFile(filepath.Join(testexporter.Root(t), "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	var ds daemonSetSpec
	decodeSpec(t, objects["DaemonSet"], &ds)
	pod := ds.Template.Spec
	if !subset(ds.Selector.MatchLabels, ds.Template.Metadata.Labels) {
		t.Error("DaemonSet selector does not match its pods")
	}
	if pod.RuntimeClassName != "nvidia" || !pod.HostPID || !pod.SecurityContext.RunAsNonRoot {
		t.Errorf("DaemonSet pod: runtimeClassName %q hostPID %v runAsNonRoot %v, want nvidia, true, true",
			pod.RuntimeClassName, pod.HostPID, pod.SecurityContext.RunAsNonRoot)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("DaemonSet: %d containers, want 1", len(pod.Containers))
	}
	ctr := pod.Containers[0]
	if !strings.HasSuffix(ctr.Image, ":"+strings.TrimSpace(string(version))) {
		t.Errorf("image %s is not tagged with VERSION %s", ctr.Image, bytes.TrimSpace(version))
	}
	env := map[string]string{}
	for _, e := range ctr.Env {
		env[e.Name] = e.Value
	}
	if env["NVIDIA_DRIVER_CAPABILITIES"] != "utility" {
		t.Error("NVIDIA_DRIVER_CAPABILITIES should be utility (NVML only)")
	}
	if ctr.SecurityContext.AllowPrivilegeEscalation == nil || *ctr.SecurityContext.AllowPrivilegeEscalation ||
		!ctr.SecurityContext.ReadOnlyRootFilesystem {
		t.Error("container should forbid privilege escalation and run read-only")
	}
	hostPaths := map[string]string{}
	for _, v := range pod.Volumes {
		hostPaths[v.Name] = v.HostPath.Path
	}
	var volumes []string
	for _, m := range ctr.VolumeMounts {
		if hostPaths[m.Name] == "/proc" && m.ReadOnly {
			volumes = append(volumes, "/proc:"+m.MountPath)
		}
	}
	if !containsProcfs(ctr.Args, volumes) {
		t.Errorf("--path.procfs must point at the read-only host /proc mount: %v", ctr.Args)
	}
	if len(ctr.Ports) != 1 || ctr.Ports[0].ContainerPort != 10240 {
		t.Fatalf("container ports %+v, want one on 10240", ctr.Ports)
	}

	svc := objects["Service"]
	var ss serviceSpec
	decodeSpec(t, svc, &ss)
	if !subset(ss.Selector, ds.Template.Metadata.Labels) {
		t.Error("Service selector does not match the DaemonSet's pods")
	}
	if len(ss.Ports) != 1 || ss.Ports[0].TargetPort != ctr.Ports[0].Name {
		t.Errorf("Service ports %+v do not target the container port %s", ss.Ports, ctr.Ports[0].Name)
	}

	var sm serviceMonitorSpec
	decodeSpec(t, objects["ServiceMonitor"], &sm)
	if !subset(sm.Selector.MatchLabels, svc.Metadata.Labels) {
		t.Error("ServiceMonitor selector does not match the Service")
	}
	if len(sm.Endpoints) != 1 || sm.Endpoints[0].Port != ss.Ports[0].Name {
		t.Fatalf("ServiceMonitor endpoints %+v do not scrape the Service port %s", sm.Endpoints, ss.Ports[0].Name)
	}
	relabel := map[string]string{}
	for _, r := range sm.Endpoints[0].Relabelings {
		relabel[r.TargetLabel] = r.Replacement
	}
	if job, ok := relabel["job"]; !ok || job != "spark" {
		t.Error(`ServiceMonitor should set job="spark", as the Prometheus examples do`)
	}
	if _, ok := relabel["instance"]; !ok {
		t.Error("ServiceMonitor should set instance to the node's name")
	}
	if _, ok := objects["PrometheusRule"]; !ok {
		t.Error("no PrometheusRule")
	}
}

// The DaemonSet outlives the OOM killer as far as a pod can: Guaranteed QoS
// (every container's requests equal to its limits, which gives oom_score_adj
// -997) and a node-critical priority class.
func TestDaemonSetOutlivesTheOOMKiller(t *testing.T) {
	data, err := os.ReadFile("kubernetes/daemonset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var ds struct {
		Spec struct {
			Template struct {
				Spec struct {
					PriorityClassName string `yaml:"priorityClassName"`
					Containers        []struct {
						Name      string `yaml:"name"`
						Resources struct {
							Requests map[string]string `yaml:"requests"`
							Limits   map[string]string `yaml:"limits"`
						} `yaml:"resources"`
					} `yaml:"containers"`
				} `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	if err := yaml.Unmarshal(data, &ds); err != nil {
		t.Fatal(err)
	}
	pod := ds.Spec.Template.Spec
	if pod.PriorityClassName != "system-node-critical" {
		t.Errorf("priorityClassName %q, want system-node-critical", pod.PriorityClassName)
	}
	if len(pod.Containers) == 0 {
		t.Fatal("no container")
	}
	for _, c := range pod.Containers {
		r := c.Resources
		for _, res := range []string{"cpu", "memory"} {
			if r.Requests[res] == "" || r.Requests[res] != r.Limits[res] {
				t.Errorf("container %s: %s request %q, limit %q: not Guaranteed QoS", c.Name, res, r.Requests[res], r.Limits[res])
			}
		}
	}
}
