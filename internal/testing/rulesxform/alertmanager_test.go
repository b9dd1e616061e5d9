package rulesxform

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
)

const base = "http://127.0.0.1:4321/hook"

func decode(t *testing.T, data []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal(data, &m); err != nil {
		t.Fatalf("%v\n%s", err, data)
	}
	return m
}

// The shipped example: URLs and timing change, nothing else does; the
// result is a configuration Alertmanager accepts and routes as before.
func TestAlertmanagerExample(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(testexporter.Root(t), "examples", "alertmanager.yml"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := Alertmanager(src, base, 60)
	if err != nil {
		t.Fatal(err)
	}
	before, after := decode(t, src), decode(t, out)

	route := after["route"].(map[string]any)
	for key, want := range map[string]string{"group_wait": "500ms", "group_interval": "5s", "repeat_interval": "4m"} {
		if route[key] != want {
			t.Errorf("route %s = %v, want %s", key, route[key], want)
		}
	}
	var pageURL any
	for _, r := range after["receivers"].([]any) {
		r := r.(map[string]any)
		if hooks, ok := r["webhook_configs"].([]any); ok {
			for _, h := range hooks {
				if r["name"] == "page" {
					pageURL = h.(map[string]any)["url"]
				}
				if h.(map[string]any)["send_resolved"] != true {
					t.Errorf("receiver %v lost send_resolved", r["name"])
				}
			}
		}
	}
	if pageURL != base+"/page" {
		t.Errorf("page's URL = %v, want %s/page", pageURL, base)
	}

	// Everything but the timing and the URLs is as shipped.
	for _, m := range []map[string]any{before, after} {
		r := m["route"].(map[string]any)
		for key := range map[string]bool{"group_wait": true, "group_interval": true, "repeat_interval": true} {
			delete(r, key)
		}
		for _, rc := range m["receivers"].([]any) {
			hooks, _ := rc.(map[string]any)["webhook_configs"].([]any)
			for _, h := range hooks {
				delete(h.(map[string]any), "url")
			}
		}
	}
	if !reflect.DeepEqual(before, after) {
		t.Errorf("more than timing and URLs changed:\nbefore %v\nafter  %v", before, after)
	}

	amtool := testexporter.Tool(t, "amtool")
	path := filepath.Join(t.TempDir(), "alertmanager.yml")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(amtool, "check-config", path).CombinedOutput(); err != nil {
		t.Fatalf("amtool check-config: %v\n%s", err, out)
	}
	for labels, receiver := range map[string]string{
		"severity=critical": "page",
		"severity=warning":  "page",
		"severity=info":     "quiet",
	} {
		args := []string{"config", "routes", "test", "--config.file=" + path, "--verify.receivers=" + receiver, "alertname=X", labels}
		if out, err := exec.Command(amtool, args...).CombinedOutput(); err != nil {
			t.Errorf("%s: want receiver %s: %v\n%s", labels, receiver, err, out)
		}
	}
}

func TestAlertmanagerRoutesAndDefaults(t *testing.T) {
	src := `route:
  receiver: a
  routes:
    - receiver: b
      group_wait: 1m
      routes:
        - receiver: a
          repeat_interval: 1h
receivers:
  - name: a
    webhook_configs:
      - url_file: /etc/secret-url
  - name: b c
    webhook_configs:
      - url: https://pager.example.com/
      - url: https://other.example.com/
`
	out, err := Alertmanager([]byte(src), base+"/", 60)
	if err != nil {
		t.Fatal(err)
	}
	m := decode(t, out)
	route := m["route"].(map[string]any)
	// The root had no timing: Alertmanager's defaults, shortened.
	for key, want := range map[string]string{"group_wait": "500ms", "group_interval": "5s", "repeat_interval": "4m"} {
		if route[key] != want {
			t.Errorf("route %s = %v, want %s", key, route[key], want)
		}
	}
	child := route["routes"].([]any)[0].(map[string]any)
	grandchild := child["routes"].([]any)[0].(map[string]any)
	if child["group_wait"] != "1s" || grandchild["repeat_interval"] != "1m" {
		t.Errorf("child routes not shortened: %v", child)
	}
	if _, ok := child["group_interval"]; ok {
		t.Error("a child route got a timing it inherits")
	}
	text := string(out)
	for _, want := range []string{"url: " + base + "/a\n", "url: " + base + "/b%20c\n"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	if strings.Count(text, base+"/b%20c") != 2 || strings.Contains(text, "url_file") || strings.Contains(text, "example.com") {
		t.Errorf("webhooks not all retargeted:\n%s", text)
	}
}

func TestAlertmanagerErrors(t *testing.T) {
	const ok = "route:\n  receiver: a\nreceivers:\n  - name: a\n"
	for _, tc := range []struct{ name, src, base, err string }{
		{"slack", ok + "    slack_configs:\n      - channel: x\n", base, "slack_configs cannot be pointed"},
		{"no route", "receivers: []\n", base, "no route"},
		{"no receivers", "route:\n  receiver: a\n", base, "no list of receivers"},
		{"unnamed receiver", "route:\n  receiver: a\nreceivers:\n  - webhook_configs: []\n", base, "no name"},
		{"odd timing", "route:\n  receiver: a\n  group_wait: 1s\nreceivers: []\n", base, "route: group_wait"},
		{"odd child timing", "route:\n  receiver: a\n  routes:\n    - group_interval: soon\nreceivers: []\n", base, "route.routes[0]: group_interval"},
		{"not a mapping", "- a\n", base, "want a mapping"},
		{"bad base", ok, "127.0.0.1:80", "not an http URL"},
	} {
		if _, err := Alertmanager([]byte(tc.src), tc.base, 60); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: err = %v, want one with %q", tc.name, err, tc.err)
		}
	}
}
