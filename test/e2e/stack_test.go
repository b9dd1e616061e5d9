//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/spark-exporter/spark_exporter/internal/testing/rulesxform"
	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
)

// speedup is how much faster than production the whole chain runs: every
// duration of the rules (`for:`, range windows), Alertmanager's
// group_wait/group_interval/repeat_interval, the thermal window and the
// stand-in GPU's scenario clock are divided by it, so ten minutes there is
// ten seconds here.
const speedup = 60

// Prometheus scrapes and evaluates every second (15 s in the example
// configuration, a quarter of a minute: the same proportion to the
// shortened windows would be 250 ms, which a 2-core CI machine running
// several exporters does not keep up with).
const scrapeInterval = time.Second

// The thermal sampler on the same faster clock: a 10 s window for the
// default 10 minutes, sampled every 250 ms (40 samples; the production
// 5 s / 60 would be 83 ms, needlessly busy for a shared CI machine).
var thermalFlags = []string{"--thermal.interval=250ms", "--thermal.window=10s"}

// target is one exporter of the run, told apart by its instance label.
type target struct {
	instance string
	procfs   string   // its /proc tree, a writable copy
	nvml     string   // the GB10 stand-in's scenario (a name of testdata/nvml/scenarios, or a path), played speedup times faster
	sysfs    string   // its /sys tree; testdata/sys/spark when ""
	args     []string // beside --path.procfs, --path.sysfs, the thermal and the NVML flags
	// sd: Prometheus also scrapes the engines this exporter lists at
	// /sd/engines (job spark-engines), as examples/prometheus.yml does.
	sd bool
}

// stack is a running chain: exporters, Prometheus, Alertmanager and the
// webhook that stands for the pager.
type stack struct {
	dir       string // configurations; logs too after a failure
	hooks     *webhook
	am, prom  *testexporter.Process
	exporters map[string]*testexporter.Process // by instance
	rules     []rulesxform.Change              // what the shortened rules changed
	ready     time.Time                        // when every target was first up
	client    *http.Client
}

// startStack starts the chain on 127.0.0.1 with free ports. Every process
// is stopped when the test ends, failed or not; after a failure the
// configurations, each component's log and every notification received
// stay in a directory that the failure message names.
func startStack(t *testing.T, targets []target) *stack {
	t.Helper()
	root := testexporter.Root(t)
	prometheus := testexporter.Tool(t, "prometheus")
	alertmanager := testexporter.Tool(t, "alertmanager")

	dir, err := os.MkdirTemp("", "spark-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	s := &stack{dir: dir, exporters: map[string]*testexporter.Process{}, client: &http.Client{Timeout: 10 * time.Second}}
	// Registered first, so it runs last: after every process has stopped
	// and its log is complete.
	t.Cleanup(func() { s.keepArtefacts(t) })

	s.hooks = newWebhook(t)

	// The shipped rules, shortened.
	ruleFiles, err := filepath.Glob(filepath.Join(root, "rules", "*.yml"))
	if err != nil || len(ruleFiles) == 0 {
		t.Fatalf("no rules/*.yml (%v)", err)
	}
	for _, f := range ruleFiles {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		short, changes, err := rulesxform.Shorten(data, speedup)
		if err != nil {
			t.Fatalf("shortening rules/%s: %v", filepath.Base(f), err)
		}
		s.rules = append(s.rules, changes...)
		s.write(t, filepath.Join("rules", filepath.Base(f)), short)
	}

	// Alertmanager, routed as the example.
	example, err := os.ReadFile(filepath.Join(root, "examples", "alertmanager.yml"))
	if err != nil {
		t.Fatal(err)
	}
	amConfig, err := rulesxform.Alertmanager(example, s.hooks.srv.URL+"/hook", speedup)
	if err != nil {
		t.Fatalf("examples/alertmanager.yml: %v", err)
	}
	s.am = testexporter.StartProgram(t, alertmanager, nil,
		"--config.file="+s.write(t, "alertmanager.yml", amConfig),
		"--storage.path="+t.TempDir(),
		"--web.listen-address=127.0.0.1:0",
		"--cluster.listen-address=", // one instance, no gossip
		"--log.level=debug")         // each notification attempt, for a failed run

	// The exporters.
	type staticConfig struct {
		Targets []string          `yaml:"targets"`
		Labels  map[string]string `yaml:"labels"`
	}
	var static []staticConfig
	var engineSD []any
	for _, tg := range targets {
		scenario := tg.nvml
		if !filepath.IsAbs(scenario) {
			scenario = testexporter.Scenario(t, scenario)
		}
		env := []string{
			"SPARK_NVML_SCENARIO=" + scenario,
			"SPARK_NVML_SPEED=" + strconv.Itoa(speedup),
		}
		// Every target a Spark with the spbm driver unless it names its
		// own tree, whatever this machine's own /sys holds.
		sysfs := tg.sysfs
		if sysfs == "" {
			sysfs = filepath.Join(testexporter.Root(t), "testdata", "sys", "spark")
		}
		// The kernel log: real lines with every kind of event, replayed at
		// start as /dev/kmsg is, which must page nothing (the counters'
		// first samples), whatever this machine's own log holds.
		kmsg := "--kernel.kmsg-path=" + filepath.Join(testexporter.Root(t), "testdata", "kmsg", "spark.kmsg")
		args := slices.Concat([]string{"--path.procfs=" + tg.procfs, "--path.sysfs=" + sysfs, "--gpu.nvml-library=" + testexporter.StandInNVML(t), kmsg},
			thermalFlags, tg.args)
		p := testexporter.Start(t, env, args...)
		s.exporters[tg.instance] = p
		static = append(static, staticConfig{
			Targets: []string{strings.TrimPrefix(p.URL, "http://")},
			Labels:  map[string]string{"instance": tg.instance},
		})
		if tg.sd {
			engineSD = append(engineSD, map[string]any{"url": p.URL + "/sd/engines", "refresh_interval": scrapeInterval.String()})
		}
	}

	// Prometheus: job "spark" with an instance label per target, as
	// examples/prometheus.yml names its Spark.
	cfg := map[string]any{
		"global": map[string]any{
			"scrape_interval":     scrapeInterval.String(),
			"scrape_timeout":      scrapeInterval.String(),
			"evaluation_interval": scrapeInterval.String(),
		},
		"rule_files": []string{"rules/*.yml"},
		"alerting": map[string]any{"alertmanagers": []any{map[string]any{
			"static_configs": []any{map[string]any{"targets": []string{strings.TrimPrefix(s.am.URL, "http://")}}},
		}}},
		"scrape_configs": []any{map[string]any{"job_name": "spark", "static_configs": static}},
	}
	if engineSD != nil {
		cfg["scrape_configs"] = append(cfg["scrape_configs"].([]any),
			map[string]any{"job_name": "spark-engines", "http_sd_configs": engineSD})
	}
	promConfig, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.prom = testexporter.StartProgram(t, prometheus, nil,
		"--config.file="+s.write(t, "prometheus.yml", promConfig),
		"--storage.tsdb.path="+t.TempDir(),
		"--web.listen-address=127.0.0.1:0",
		// A firing alert is sent again every minute by default, every
		// second here: the same proportion.
		"--rules.alert.resend-delay="+scrapeInterval.String())

	testexporter.Eventually(t, 60*time.Second, func() bool {
		resp, err := s.client.Get(s.prom.URL + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, "Prometheus to be ready")
	testexporter.Eventually(t, 60*time.Second, func() bool {
		up, err := s.query(`up{job="spark"} == 1`)
		return err == nil && len(up) == len(targets)
	}, "Prometheus to scrape all %d exporters", len(targets))
	s.ready = time.Now()
	return s
}

// write writes a file under the artefacts directory and returns its path.
func (s *stack) write(t *testing.T, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(s.dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// keepArtefacts removes the artefacts of a passing run, and completes and
// names those of a failed one.
func (s *stack) keepArtefacts(t *testing.T) {
	if !t.Failed() {
		os.RemoveAll(s.dir)
		return
	}
	logs := map[string]*testexporter.Process{"alertmanager": s.am, "prometheus": s.prom}
	for instance, p := range s.exporters {
		logs["exporter-"+instance] = p
	}
	for name, p := range logs {
		if p != nil {
			s.write(t, name+".log", []byte(p.Logs()))
		}
	}
	if s.hooks != nil {
		s.write(t, "notifications.json", s.hooks.dump())
	}
	t.Errorf("end-to-end run failed: configurations, logs of every component and the notifications received are in %s", s.dir)
}

// maxFor is the longest `for:` of the shortened rules.
func (s *stack) maxFor() time.Duration {
	var longest time.Duration
	for _, c := range s.rules {
		if c.Field == "for" {
			longest = max(longest, c.Parsed())
		}
	}
	return longest
}

// forOf is an alert's shortened `for:` (the longest, if it has several
// rules).
func (s *stack) forOf(t *testing.T, alert string) time.Duration {
	t.Helper()
	var longest time.Duration
	for _, c := range s.rules {
		if c.Rule == alert && c.Field == "for" {
			longest = max(longest, c.Parsed())
		}
	}
	if longest == 0 {
		t.Fatalf("%s has no `for:`", alert)
	}
	return longest
}

// window is the (only) range of an alert's shortened expression.
func (s *stack) window(t *testing.T, alert string) time.Duration {
	t.Helper()
	var ranges []time.Duration
	for _, c := range s.rules {
		if c.Rule == alert && c.Field == "expr" {
			ranges = append(ranges, c.Parsed())
		}
	}
	if len(ranges) != 1 {
		t.Fatalf("%s has %d range windows, want 1", alert, len(ranges))
	}
	return ranges[0]
}

// series is one element of a query's result.
type series struct {
	Metric map[string]string
	Value  float64
}

// query runs an instant query through Prometheus' HTTP API, now.
func (s *stack) query(expr string) ([]series, error) {
	return s.queryAt(expr, time.Time{})
}

// queryAt runs an instant query at a given time (now when zero), so that
// several queries read the same samples.
func (s *stack) queryAt(expr string, at time.Time) ([]series, error) {
	params := url.Values{"query": {expr}}
	if !at.IsZero() {
		params.Set("time", strconv.FormatFloat(float64(at.UnixMilli())/1000, 'f', 3, 64))
	}
	resp, err := s.client.Get(s.prom.URL + "/api/v1/query?" + params.Encode())
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string          `json:"resultType"`
			Result     json.RawMessage `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("%s: %v", resp.Status, err)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("%s: %s", resp.Status, r.Error)
	}
	type sample struct {
		Metric map[string]string `json:"metric"`
		Value  [2]any            `json:"value"`
	}
	var samples []sample
	switch r.Data.ResultType {
	case "vector":
		err = json.Unmarshal(r.Data.Result, &samples)
	case "scalar":
		samples = []sample{{}}
		err = json.Unmarshal(r.Data.Result, &samples[0].Value)
	default:
		err = fmt.Errorf("result type %s, want a vector or a scalar", r.Data.ResultType)
	}
	if err != nil {
		return nil, err
	}
	out := make([]series, len(samples))
	for i, sm := range samples {
		text, _ := sm.Value[1].(string)
		v, err := strconv.ParseFloat(text, 64)
		if err != nil {
			return nil, fmt.Errorf("sample value %v: %v", sm.Value[1], err)
		}
		out[i] = series{sm.Metric, v}
	}
	return out, nil
}

// alertState is an alert as Alertmanager's API lists it.
type alertState struct {
	Labels    map[string]string `json:"labels"`
	Receivers []struct {
		Name string `json:"name"`
	} `json:"receivers"`
	Status struct {
		State string `json:"state"`
	} `json:"status"`
}

// alerts lists the alerts Alertmanager holds.
func (s *stack) alerts(t *testing.T) []alertState {
	t.Helper()
	var out []alertState
	if err := json.Unmarshal([]byte(s.am.Get(t, "/api/v2/alerts")), &out); err != nil {
		t.Fatalf("Alertmanager /api/v2/alerts: %v", err)
	}
	return out
}

// alert is one alert of a webhook notification (Alertmanager's webhook
// payload, version 4).
type alert struct {
	Status      string            `json:"status"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	StartsAt    time.Time         `json:"startsAt"`
}

type notification struct {
	Receiver string  `json:"receiver"`
	Status   string  `json:"status"`
	Alerts   []alert `json:"alerts"`
}

// delivery is a notification as it arrived: on which receiver's URL.
type delivery struct {
	Path         string       `json:"path"`
	Notification notification `json:"notification"`
}

// webhook is the pager: an HTTP server on 127.0.0.1 that records every
// notification Alertmanager posts to /hook/RECEIVER.
type webhook struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []delivery
}

func newWebhook(t *testing.T) *webhook {
	h := &webhook{}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var n notification
		if r.Method != http.MethodPost {
			http.Error(w, "POST only", http.StatusMethodNotAllowed)
			return
		}
		if err := json.NewDecoder(r.Body).Decode(&n); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		h.mu.Lock()
		h.got = append(h.got, delivery{r.URL.Path, n})
		h.mu.Unlock()
	}))
	t.Cleanup(h.srv.Close)
	return h
}

// find returns the alerts of a status (firing, resolved) posted to a
// receiver's URL whose labels include all of want.
func (h *webhook) find(receiver, status string, want map[string]string) []alert {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []alert
	for _, d := range h.got {
		if d.Path != "/hook/"+receiver {
			continue
		}
		for _, a := range d.Notification.Alerts {
			if a.Status == status && includes(a.Labels, want) {
				out = append(out, a)
			}
		}
	}
	return out
}

func (h *webhook) dump() []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	data, _ := json.MarshalIndent(h.got, "", "  ")
	return data
}

func includes(labels, want map[string]string) bool {
	for k, v := range want {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// receiverNames lists an alert's receivers.
func (a alertState) receiverNames() []string {
	var names []string
	for _, r := range a.Receivers {
		names = append(names, r.Name)
	}
	slices.Sort(names)
	return names
}
