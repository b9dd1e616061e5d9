package main

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
)

// A run whose inputs carry a secret everywhere one could hide: command
// lines and environments of the processes in /proc, their names, the
// paths of every file the exporter is pointed at, its own environment and
// command line, the web config's password. Nothing of them may reach
// /metrics, any HTTP answer (status page and its JSON, errors, auth
// challenge) or the
// log at debug level; the one exception is a process's name (comm), which
// docs/metrics.md exports as the comm label of spark_gpu_process_memory_bytes,
// and only there.
func TestNoSecretReachesAnyOutput(t *testing.T) {
	base := t.TempDir()
	secretDir := func(name string) string {
		dir := filepath.Join(base, name+"-SecretPath")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		return dir
	}

	// /proc: the Spark tree (an --api-key in 2101's command line, an
	// HF_TOKEN in environs), plus a server with a secret pasted into its
	// cap flag, a program whose name is a token, and the embedding server
	// on the GPU renamed to a token.
	procfs := secretDir("proc")
	if err := os.CopyFS(procfs, os.DirFS(fixtureDir(t, "spark"))); err != nil {
		t.Fatal(err)
	}
	const (
		pasted     = "sk-live-PastedIntoTheCapFlag"
		commSecret = "tok-CommSecret1" // 15 bytes: the longest comm
		gpuComm    = "tok-GpuComm0001"
		envSecret  = "env-ExporterOwnEnvSecret"
	)
	writeProcess(t, procfs, "3500", "python3",
		"python3\x00-m\x00sglang.launch_server\x00--mem-fraction-static="+pasted+"\x00--api-key\x00"+pasted+"\x00")
	writeProcess(t, procfs, "3700", commSecret, "/usr/bin/"+commSecret+"\x00--token="+pasted+"\x00")
	for file, data := range map[string]string{
		"comm":   gpuComm + "\n",
		"status": "Name:\t" + gpuComm + "\nVmRSS:\t 1048576 kB\n",
	} {
		if err := os.WriteFile(filepath.Join(procfs, "4102", file), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stat := filepath.Join(procfs, "4102", "stat")
	data, err := os.ReadFile(stat)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stat, []byte(strings.Replace(string(data), "(embed-server)", "("+gpuComm+")", 1)), 0o644); err != nil {
		t.Fatal(err)
	}

	// A source that fails, so that a collector's error reaches the log: it
	// quotes the file, which is under the secret directory.
	psi := filepath.Join(procfs, "pressure", "memory")
	if err := os.Remove(psi); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(psi, 0o755); err != nil {
		t.Fatal(err)
	}

	// Files the exporter is pointed at, each under a directory whose name
	// is a secret.
	lib := nobodyCopy(t, testexporter.StandInNVML(t), secretDir("lib"))
	scenario := copyFile(t, testexporter.Scenario(t, "gb10-throttle"), secretDir("scenario"))
	plans := copyFile(t, filepath.Join(testexporter.Root(t), "testdata", "plans", "spark.yml"), secretDir("plans"))
	webConfig := filepath.Join(secretDir("web"), "web.yml")
	if err := os.WriteFile(webConfig, []byte("basic_auth_users:\n  "+scrapeUser+": "+scrapeHash+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	csv := filepath.Join(secretDir("csv"), "thermal.csv")

	p := testexporter.Start(t, []string{
		"SPARK_NVML_SCENARIO=" + scenario, "SPARK_NVML_FREEZE=45m",
		"SPARK_EXPORTER_TOKEN=" + envSecret,
	},
		"--path.procfs="+procfs, "--gpu.nvml-library="+lib, "--plan.file="+plans,
		"--web.config.file="+webConfig, "--thermal.csv-file="+csv,
		"--thermal.interval=100ms", "--thermal.window=1s",
		"--workloads.match=inference:wrapped:^/usr/bin/tok-",
		"--log.level=debug")

	client := &http.Client{Timeout: 30 * time.Second}
	auth := basicAuth(scrapeUser, scrapePassword)
	outputs := map[string]string{} // where: what was said
	var metrics string
	for _, tc := range []struct {
		path string
		auth func(*http.Request)
		code int
	}{
		{"/metrics", nil, http.StatusUnauthorized},
		{"/metrics", basicAuth(scrapeUser, pasted), http.StatusUnauthorized},
		{"/", auth, http.StatusOK},
		{"/", nil, http.StatusUnauthorized},
		{"/api/v1/status", nil, http.StatusUnauthorized},
		{"/api/v1/status", auth, http.StatusOK},
		{"/no-such-page", auth, http.StatusNotFound},
		{"/metrics?collect[]=nosuch", auth, http.StatusBadRequest},
		{"/metrics?collect[]=gpu", auth, http.StatusOK},
		{"/metrics", auth, http.StatusOK},
	} {
		code, header, body := fetch(t, client, p.URL+tc.path, tc.auth)
		if code != tc.code {
			t.Errorf("GET %s: %d, want %d\n%s", tc.path, code, tc.code, body)
		}
		var h strings.Builder
		header.Write(&h)
		outputs["the answer to GET "+tc.path+" ("+http.StatusText(code)+")"] = h.String() + "\n" + body
		metrics = body
	}
	// The run did see every place a secret was put.
	for _, series := range []string{
		`spark_workload_info{container="",kind="vllm",pid="2101",pod_uid="",role="inference"} 1`,
		`spark_workload_info{container="",kind="sglang",pid="3500",pod_uid="",role="inference"} 1`,
		`spark_workload_info{container="",kind="wrapped",pid="3700",pod_uid="",role="inference"} 1`,
		`spark_gpu_process_memory_bytes{comm="` + gpuComm + `",gpu="0",pid="4102"}`,
		`spark_plan_required_bytes{plan="llama-3.1-70b-qlora"}`,
		`spark_scrape_collector_success{collector="thermal"} 1`,
	} {
		if !strings.Contains(metrics, series) {
			t.Errorf("/metrics lacks %s", series)
		}
	}
	testexporter.Eventually(t, 30*time.Second, func() bool {
		_, err := os.Stat(csv)
		return err == nil
	}, "the CSV log")
	p.WaitLog(t, "no memory cap exported")
	p.WaitLog(t, "pressure/memory: is a directory")
	p.Stop(t)
	outputs["the log"] = p.Logs()

	secrets := []string{
		"sk-spark-FixtureCmdlineSecretDoNotLeak", "hf_FixtureEnvSecretDoNotLeak0000", "DoNotLeak",
		pasted, "PastedInto", commSecret, "CommSecret", envSecret, "ExporterOwnEnv",
		"SecretPath", base, scrapePassword, "Pa55word", scrapeHash, scrapeHash[7:20],
		"^/usr/bin/tok-", // the user pattern's regular expression
	}
	for where, text := range outputs {
		for _, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("%s carries %q", where, s)
			}
		}
	}
	// The GPU process's name is exported as docs/metrics.md says, and nowhere
	// else.
	comm := regexp.MustCompile(`(?m)^spark_gpu_process_memory_bytes\{comm="` + gpuComm + `",gpu="0",pid="4102"\} \S+$`)
	for where, text := range outputs {
		if n, allowed := strings.Count(text, gpuComm), len(comm.FindAllString(text, -1)); n != allowed {
			t.Errorf("%s carries the GPU process's name %d times, %d of them in its comm label", where, n, allowed)
		}
	}
}

// writeProcess adds /proc/PID with stat, status, comm, cmdline and an
// environ holding a secret.
func writeProcess(t *testing.T, procfs, pid, comm, cmdline string) {
	t.Helper()
	dir := filepath.Join(procfs, pid)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{
		"stat":    pid + " (" + comm + ") S 2010 " + pid + " 2010 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 9 0 4950000 0 0\n",
		"status":  "Name:\t" + comm + "\nVmRSS:\t 2097152 kB\n",
		"comm":    comm + "\n",
		"cmdline": cmdline,
		"environ": "OPENAI_API_KEY=sk-live-PastedIntoTheCapFlag\x00",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func copyFile(t *testing.T, src, dir string) string {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, filepath.Base(src))
	if err := os.WriteFile(dst, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}
