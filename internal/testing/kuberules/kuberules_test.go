package kuberules

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

const pool = `# Pool alerts.
groups:
  - name: spark-pool
    rules:
      # Free memory below the reserve.
      - alert: SparkPoolHeadroomLow
        expr: |
          spark_pool_headroom_bytes
            < 0
        for: 5m
        labels:
          severity: warning
`

const gpu = `groups:
  - name: spark-gpu-recording
    rules:
      - record: level:spark_gpu_power_watts:avg10m
        expr: avg_over_time(spark_gpu_power_watts[10m])
  - name: spark-gpu
    rules: []
`

type manifest struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name      string            `yaml:"name"`
		Namespace string            `yaml:"namespace"`
		Labels    map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Spec struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert, Record, Expr, For string
				Labels                   map[string]string
			} `yaml:"rules"`
		} `yaml:"groups"`
	} `yaml:"spec"`
}

func TestPrometheusRule(t *testing.T) {
	// Given out of order: the manifest follows file names.
	out, err := PrometheusRule([]File{{"pool.yml", []byte(pool)}, {"gpu.yml", []byte(gpu)}})
	if err != nil {
		t.Fatal(err)
	}
	var m manifest
	if err := yaml.Unmarshal(out, &m); err != nil {
		t.Fatalf("output is not YAML: %v\n%s", err, out)
	}
	if m.APIVersion != "monitoring.coreos.com/v1" || m.Kind != "PrometheusRule" ||
		m.Metadata.Name != "spark-exporter" || m.Metadata.Labels["app.kubernetes.io/name"] != "spark-exporter" {
		t.Errorf("header: %+v", m)
	}
	var names []string
	for _, g := range m.Spec.Groups {
		names = append(names, g.Name)
	}
	if got, want := strings.Join(names, ","), "spark-gpu-recording,spark-gpu,spark-pool"; got != want {
		t.Errorf("groups %s, want %s", got, want)
	}
	r := m.Spec.Groups[2].Rules[0]
	if r.Alert != "SparkPoolHeadroomLow" || r.For != "5m" || r.Labels["severity"] != "warning" ||
		r.Expr != "spark_pool_headroom_bytes\n  < 0\n" {
		t.Errorf("rule not copied as written: %+v", r)
	}
	s := string(out)
	for _, want := range []string{"# " + Header, "# Free memory below the reserve.", "expr: |"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
}

func TestPrometheusRuleNoFiles(t *testing.T) {
	for _, files := range [][]File{nil, {{"empty.yml", nil}}} {
		out, err := PrometheusRule(files)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(out), "groups: []") {
			t.Errorf("%d files: want an empty group list:\n%s", len(files), out)
		}
	}
}

func TestPrometheusRuleErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files []File
		want  string
	}{
		{"not yaml", []File{{"a.yml", []byte("groups: [")}}, "a.yml"},
		{"key twice", []File{{"a.yml", []byte("groups:\n  - name: x\n    name: y\n")}}, `"name" already defined`},
		{"not a mapping", []File{{"a.yml", []byte("- 1\n")}}, "not a rule file"},
		{"other key", []File{{"a.yml", []byte("groups: []\nalerts: []\n")}}, `unexpected key "alerts"`},
		{"groups not a list", []File{{"a.yml", []byte("groups: x\n")}}, "groups is not a list"},
		{"group not a mapping", []File{{"a.yml", []byte("groups: [x]\n")}}, "not a mapping"},
		{"unnamed group", []File{{"a.yml", []byte("groups: [{rules: []}]\n")}}, "no name"},
		{"same group twice", []File{{"a.yml", []byte(gpu)}, {"b.yml", []byte(gpu)}}, `"spark-gpu-recording" is in both a.yml and b.yml`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := PrometheusRule(tc.files)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// Any input gives an error or a manifest that is valid YAML, never a panic.
// (The rules themselves are promtool's to check: groups are copied as
// written.)
func FuzzPrometheusRule(f *testing.F) {
	f.Add([]byte(pool))
	f.Add([]byte(gpu))
	f.Add([]byte("---\n"))
	f.Add([]byte("groups:\n  - name: [1]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := PrometheusRule([]File{{"f.yml", data}})
		if err == nil {
			var m map[string]any
			if err := yaml.Unmarshal(out, &m); err != nil {
				t.Fatalf("generated manifest does not parse: %v\n%s", err, out)
			}
		}
	})
}
