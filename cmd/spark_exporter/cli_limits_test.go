package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spark-exporter/spark_exporter/internal/status"
	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
)

// Issue 28: what `status` and `report` take from a server, bounded and
// made harmless.

// statusServer serves model at the status API on 127.0.0.1; check, if not
// nil, sees every request first and may answer it itself.
func statusServer(t *testing.T, body []byte, check func(w http.ResponseWriter, r *http.Request) bool) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if check != nil && !check(w, r) {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func hostileModel(t *testing.T) []byte {
	t.Helper()
	hostile := "GB10\x1b[2J\x1b[H\u202egnilttorhT\nPool     all fine"
	m := status.Model{APIVersion: status.APIVersion, GeneratedAt: "2025-11-24T14:00:00Z" + hostile,
		Exporter: status.BuildInfo{Version: hostile}, NVML: status.NVML{Text: hostile},
		GPUs:       []status.GPU{{Index: 0, Name: hostile}},
		Collectors: []status.Collector{{Name: hostile, Success: false}}}
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// Issue 28, item 9: a hostile or intercepted server's strings (GPU name,
// verdicts, collector names) reach the terminal without the escapes that
// would clear it or the override that would reverse a word, and without
// a newline that would start a line of their own.
func TestStatusStripsServerStrings(t *testing.T) {
	srv := statusServer(t, hostileModel(t), nil)
	out, err := testexporter.Command(t, "status", "--url="+srv.URL).CombinedOutput()
	if err != nil {
		t.Fatalf("status: %v\n%s", err, out)
	}
	for _, bad := range []string{"\x1b", "\u202e", "\nPool     all fine"} {
		if strings.Contains(string(out), bad) {
			t.Errorf("status printed %q:\n%q", bad, out)
		}
	}
	if !strings.Contains(string(out), "GB10[2J[H") {
		t.Errorf("the GPU's printable name is gone:\n%s", out)
	}
}

// Issue 28, item 10: credentials from a file or the environment, never
// only in a URL that ps shows; a bad URL is never echoed with its
// password.
func TestStatusCredentialsWithoutTheURL(t *testing.T) {
	const user, password = "spark", "Secret123"
	srv := statusServer(t, hostileModel(t), func(w http.ResponseWriter, r *http.Request) bool {
		if u, p, ok := r.BasicAuth(); !ok || u != user || p != password {
			w.WriteHeader(http.StatusUnauthorized)
			return false
		}
		return true
	})
	dir := t.TempDir()
	passwordFile := filepath.Join(dir, "password")
	config := filepath.Join(dir, "http.yml")
	for name, data := range map[string]string{
		passwordFile: password + "\n",
		config:       "basic_auth:\n  username: " + user + "\n  password_file: " + passwordFile + "\n",
	} {
		if err := os.WriteFile(name, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		args []string
		env  string
		code int
	}{
		{[]string{"--basic-auth-user=" + user, "--basic-auth-password-file=" + passwordFile}, "", 0},
		{[]string{"--basic-auth-user=" + user}, "SPARK_EXPORTER_PASSWORD=" + password, 0},
		{[]string{"--http.config.file=" + config}, "", 0},
		{[]string{"--basic-auth-user=" + user}, "SPARK_EXPORTER_PASSWORD=wrong", 1},
		{nil, "", 1},
	} {
		cmd := testexporter.Command(t, append([]string{"status", "--url=" + srv.URL}, tc.args...)...)
		cmd.Env = append(os.Environ(), tc.env)
		out, err := cmd.CombinedOutput()
		if code := exitCode(err); code != tc.code || strings.Contains(string(out), password) {
			t.Errorf("status %v %s: exit %d, want %d\n%s", tc.args, tc.env, code, tc.code, out)
		}
	}
	for _, args := range [][]string{
		{"status", "--url=ftp://spark:Secret123@127.0.0.1:1"},
		{"status", "--url=http://spark:Secret123@[::1"},
		{"report", "--prometheus.url=ftp://spark:Secret123@127.0.0.1:1"},
		{"report", "--prometheus.url=http://spark:Secret123@127.0.0.1:1/%zz"},
	} {
		out, err := testexporter.Command(t, args...).CombinedOutput()
		if code := exitCode(err); code != 2 || strings.Contains(string(out), password) || !strings.Contains(string(out), "invalid value") {
			t.Errorf("%v: exit %d, want 2 without the password\n%s", args, code, out)
		}
	}
}

// Issue 28, item 10: follow_redirects: false in --http.config.file is
// honoured by `status` and `report`: the redirect's target is never asked.
func TestFollowRedirectsFalseIsHonoured(t *testing.T) {
	followed := make(chan string, 16)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		followed <- r.URL.Path
		http.Error(w, "should not be asked", http.StatusTeapot)
	}))
	t.Cleanup(target.Close)
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+r.URL.Path, http.StatusFound)
	}))
	t.Cleanup(redirect.Close)
	config := filepath.Join(t.TempDir(), "http.yml")
	if err := os.WriteFile(config, []byte("follow_redirects: false\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"status", "--url=" + redirect.URL, "--http.config.file=" + config},
		{"report", "--prometheus.url=" + redirect.URL, "--http.config.file=" + config, "--instance=a", "--last=1m"},
	} {
		out, err := testexporter.Command(t, args...).CombinedOutput()
		if code := exitCode(err); code != 1 {
			t.Errorf("%v: exit %d, want 1\n%s", args[0], code, out)
		}
	}
	select {
	case path := <-followed:
		t.Errorf("a redirect was followed to %s", path)
	default:
	}
}

// Issue 28: `status --json` of an answer over 16 MiB fails, exit 1, with
// a clear error, rather than print it cut.
func TestStatusJSONOverTheLimitFails(t *testing.T) {
	huge := []byte(`{"api_version":"` + status.APIVersion + `","pad":"` + strings.Repeat("x", 17<<20) + `"}`)
	srv := statusServer(t, huge, nil)
	cmd := testexporter.Command(t, "status", "--json", "--url="+srv.URL)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if code := exitCode(err); code != 1 || stdout.Len() != 0 || !strings.Contains(stderr.String(), "larger than 16 MiB") {
		t.Errorf("exit %d, %d bytes printed, stderr %q", code, stdout.Len(), stderr.String())
	}
}
