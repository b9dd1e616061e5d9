package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
)

// Faults of the web side: TLS and basic auth, bad web configs, the
// --web.max-requests limit, clients that leave mid-scrape, and collect[] /
// exclude[] filters. docs/robustness.md lists them.

// The web config's user and password; the config holds only the bcrypt hash
// (cost 4, the lowest, to keep the test fast).
const (
	scrapeUser     = "prometheus"
	scrapePassword = "scrape-Pa55word-DoNotLeak"
	scrapeHash     = "$2a$04$EmDV5OpwugsKjfFrjDpd8ueNZasI7JMXH7dBxa1xDPLdDyXEe04o."
)

// selfSignedCert writes a certificate for 127.0.0.1 and its key into dir
// and returns a pool that trusts it.
func selfSignedCert(t *testing.T, dir string) (certFile, keyFile string, roots *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "spark_exporter test"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := os.WriteFile(certFile, certPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	roots = x509.NewCertPool()
	roots.AppendCertsFromPEM(certPEM)
	return certFile, keyFile, roots
}

// writeWebConfig writes a web config with TLS and the test's user.
func writeWebConfig(t *testing.T, dir string) (path string, roots *x509.CertPool) {
	t.Helper()
	cert, key, roots := selfSignedCert(t, dir)
	path = filepath.Join(dir, "web.yml")
	config := "tls_server_config:\n  cert_file: " + cert + "\n  key_file: " + key + "\n" +
		"basic_auth_users:\n  " + scrapeUser + ": " + scrapeHash + "\n"
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, roots
}

// fetch sends one bounded request and returns the status and body.
func fetch(t *testing.T, client *http.Client, url string, auth func(*http.Request)) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != nil {
		auth(req)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(body)
}

func basicAuth(user, password string) func(*http.Request) {
	return func(r *http.Request) { r.SetBasicAuth(user, password) }
}

// TLS and basic auth from --web.config.file, checked with a real TLS client:
// no credentials or a wrong password is 401, the right one 200; a client
// that does not trust the certificate gets no answer, and plain HTTP is
// turned away.
func TestWebConfigTLSAndBasicAuth(t *testing.T) {
	config, roots := writeWebConfig(t, t.TempDir())
	p := testexporter.Start(t, nil, "--path.procfs="+fixtureDir(t, "spark"), noGPU,
		"--web.config.file="+config, "--log.level=debug")
	url := strings.Replace(p.URL, "http://", "https://", 1)
	client := &http.Client{Timeout: 30 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}

	for _, tc := range []struct {
		name string
		path string
		auth func(*http.Request)
		want int
	}{
		{"no credentials", "/metrics", nil, http.StatusUnauthorized},
		{"wrong password", "/metrics", basicAuth(scrapeUser, "guess"), http.StatusUnauthorized},
		{"unknown user", "/metrics", basicAuth("admin", scrapePassword), http.StatusUnauthorized},
		{"status page without credentials", "/", nil, http.StatusUnauthorized},
		{"status JSON without credentials", "/api/v1/status", nil, http.StatusUnauthorized},
		{"right password", "/metrics", basicAuth(scrapeUser, scrapePassword), http.StatusOK},
		{"status page", "/", basicAuth(scrapeUser, scrapePassword), http.StatusOK},
		{"status JSON", "/api/v1/status", basicAuth(scrapeUser, scrapePassword), http.StatusOK},
	} {
		code, header, body := fetch(t, client, url+tc.path, tc.auth)
		if code != tc.want {
			t.Errorf("%s: status %d, want %d\n%s", tc.name, code, tc.want, body)
		}
		if code == http.StatusUnauthorized && header.Get("WWW-Authenticate") != "Basic" {
			t.Errorf("%s: 401 without a Basic challenge", tc.name)
		}
		if code == http.StatusOK && tc.path == "/metrics" && !strings.Contains(body, "spark_pool_total_bytes ") {
			t.Errorf("%s: no pool metrics:\n%s", tc.name, body)
		}
		if strings.Contains(body, scrapePassword) || strings.Contains(body, scrapeHash) {
			t.Errorf("%s: the response carries the password or its hash", tc.name)
		}
	}

	untrusting := &http.Client{Timeout: 30 * time.Second}
	if resp, err := untrusting.Get(url + "/metrics"); err == nil {
		resp.Body.Close()
		t.Error("a client that does not trust the certificate got an answer")
	} else if !strings.Contains(err.Error(), "certificate") {
		t.Errorf("untrusted certificate: %v", err)
	}
	if code, _, body := fetch(t, &http.Client{Timeout: 30 * time.Second}, p.URL+"/metrics", nil); code != http.StatusBadRequest || strings.Contains(body, "spark_") {
		t.Errorf("plain HTTP on the TLS port: %d\n%s", code, body)
	}

	p.Stop(t)
	if logs := p.Logs(); strings.Contains(logs, scrapePassword) || strings.Contains(logs, scrapeHash) || strings.Contains(logs, "guess") {
		t.Errorf("the log carries a password or its hash:\n%s", logs)
	} else if !strings.Contains(logs, "TLS is enabled") {
		t.Errorf("TLS not reported as enabled:\n%s", logs)
	}
}

// refusedAtStart runs the exporter with args, which must make it exit 1
// before serving, and returns what it printed.
func refusedAtStart(t *testing.T, env []string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, testexporter.Binary(t), append([]string{"--web.listen-address=127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 1 {
		t.Fatalf("%q: exit %v (%v), want 1 at start:\n%s", args, cmd.ProcessState, err, out)
	}
	if strings.Contains(string(out), "Listening on") {
		t.Errorf("%q: listened before refusing:\n%s", args, out)
	}
	return string(out)
}

// A web config that cannot work stops the exporter at start, with an error
// that names the flag and the problem but no path and no secret.
func TestBadWebConfigRefusedAtStart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "private-dir")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cert, key, _ := selfSignedCert(t, dir)
	otherCert, _, _ := selfSignedCert(t, t.TempDir())
	huge := filepath.Join(dir, "huge.pem")
	if err := os.WriteFile(huge, make([]byte, 2<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, config string // config "" : the file does not exist
		want         string
	}{
		{"missing file", "", "no such file or directory"},
		{"not YAML", "basic_auth_users: [\n", "yaml"},
		{"unknown key", "basic_auth_users:\n  a: " + scrapeHash + "\npasword: x\n", "field pasword not found"},
		{"a plaintext password instead of its hash", "basic_auth_users:\n  " + scrapeUser + ": " + scrapePassword + "\n", "bcrypt"},
		{"certificate file missing", "tls_server_config:\n  cert_file: " + filepath.Join(dir, "gone.pem") + "\n  key_file: " + key + "\n", "cert_file"},
		{"key of another certificate", "tls_server_config:\n  cert_file: " + otherCert + "\n  key_file: " + key + "\n", "private key does not match public key"},
		{"key without certificate", "tls_server_config:\n  key_file: key.pem\n", "missing one of cert or cert_file"},
		{"relative certificate path", "tls_server_config:\n  cert_file: nothere.pem\n  key_file: " + key + "\n", "failed to read cert_file"},
		// Issue 38, item 11: an endless certificate took all memory; a hash
		// of cost 31 made its user's first request never answer.
		{"certificate from /dev/zero", "tls_server_config:\n  cert_file: /dev/zero\n  key_file: " + key + "\n", "cert_file: not a regular file"},
		{"key from a directory", "tls_server_config:\n  cert_file: " + cert + "\n  key_file: " + dir + "\n", "key_file: not a regular file"},
		{"certificate over 1 MiB", "tls_server_config:\n  cert_file: " + huge + "\n  key_file: " + key + "\n", "cert_file: 2097152 bytes, more than"},
		{"bcrypt cost 31", "basic_auth_users:\n  " + scrapeUser + ": " + strings.Replace(scrapeHash, "$04$", "$31$", 1) + "\n", "bcrypt cost 31, more than 14"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "web.yml")
			os.Remove(path)
			if tc.config != "" {
				if err := os.WriteFile(path, []byte(tc.config), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			out := refusedAtStart(t, nil, "--path.procfs="+fixtureDir(t, "spark"), noGPU, "--web.config.file="+path)
			if !strings.Contains(out, "invalid --web.config.file") || !strings.Contains(out, tc.want) {
				t.Errorf("the error does not name the flag and say %q:\n%s", tc.want, out)
			}
			for _, secret := range []string{"private-dir", cert, scrapePassword, scrapeUser, "nothere.pem", "gone.pem", "huge.pem"} {
				if strings.Contains(out, secret) {
					t.Errorf("the error carries %q:\n%s", secret, out)
				}
			}
		})
	}
}

// heldProc is a copy of the Spark /proc whose meminfo is a named pipe: a
// scrape of the pool collector blocks in its read until the test writes the
// file. Tests hold scrapes in flight with it, without sleeping.
type heldProc struct {
	dir, meminfo string
	content      []byte
}

func newHeldProc(t *testing.T) *heldProc {
	t.Helper()
	dir := testexporter.CopyTree(t, fixtureDir(t, "spark"))
	h := &heldProc{dir: dir, meminfo: filepath.Join(dir, "meminfo")}
	var err error
	if h.content, err = os.ReadFile(h.meminfo); err != nil {
		t.Fatal(err)
	}
	os.Remove(h.meminfo)
	if err := syscall.Mkfifo(h.meminfo, 0o644); err != nil {
		t.Fatal(err)
	}
	return h
}

// waitReader waits until a scrape has opened the pipe, and returns the
// pipe's writing end. Opening a FIFO for writing without blocking succeeds
// only once a reader has it open.
func (h *heldProc) waitReader(t *testing.T) *os.File {
	t.Helper()
	var w *os.File
	testexporter.Eventually(t, 30*time.Second, func() bool {
		fd, err := syscall.Open(h.meminfo, syscall.O_WRONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
		if err != nil {
			return false
		}
		w = os.NewFile(uintptr(fd), h.meminfo)
		return true
	}, "a scrape to open meminfo")
	return w
}

// release answers the held read with the fixture's meminfo.
func (h *heldProc) release(t *testing.T, w *os.File) {
	t.Helper()
	if _, err := w.Write(h.content); err != nil {
		t.Fatal(err)
	}
	w.Close()
}

// unhold puts a plain meminfo back, so that later scrapes do not block.
func (h *heldProc) unhold(t *testing.T) {
	t.Helper()
	tmp := h.meminfo + ".new"
	if err := os.WriteFile(tmp, h.content, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, h.meminfo); err != nil {
		t.Fatal(err)
	}
}

// heldReadTimeout gives a held read a deadline far beyond the test's
// steps: the exporter gives up on a read after --path.read-timeout.
const heldReadTimeout = "--path.read-timeout=2m"

// poolOnly runs the pool collector alone, the only one that reads meminfo.
var poolOnly = []string{"--no-collector.gpu", "--no-collector.thermal", "--no-collector.workloads"}

// One scrape more than --web.max-requests is refused with 503 at once,
// whether either scrape is filtered by collect[] or not, and the slot is
// free again once the scrape in flight ends.
func TestMaxRequestsRefusesTheScrapeTooMany(t *testing.T) {
	h := newHeldProc(t)
	p := testexporter.Start(t, nil, append([]string{"--path.procfs=" + h.dir, "--web.max-requests=1", heldReadTimeout}, poolOnly...)...)
	client := &http.Client{Timeout: 30 * time.Second}
	for _, tc := range []struct{ held, extra string }{
		{"/metrics", "/metrics"},
		{"/metrics?collect[]=pool", "/metrics"},
		{"/metrics", "/metrics?exclude[]=pool"},
		{"/metrics?collect[]=pool", "/metrics?collect[]=pool"},
	} {
		type result struct {
			code int
			body string
			err  error
		}
		held := make(chan result, 1)
		go func() {
			resp, err := client.Get(p.URL + tc.held)
			if err != nil {
				held <- result{err: err}
				return
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			held <- result{resp.StatusCode, string(body), err}
		}()
		w := h.waitReader(t)
		code, _, body := fetch(t, client, p.URL+tc.extra, nil)
		if code != http.StatusServiceUnavailable || !strings.Contains(body, "Limit of concurrent requests reached (1)") {
			t.Errorf("%s while %s is in flight: %d %s, want 503", tc.extra, tc.held, code, body)
		}
		h.release(t, w)
		r := <-held
		if r.err != nil || r.code != http.StatusOK || !strings.Contains(r.body, `spark_scrape_collector_success{collector="pool"} 1`) {
			t.Errorf("the scrape in flight (%s): %d %v\n%s", tc.held, r.code, r.err, r.body)
		}
	}
	// With the pipe replaced by a file, scrapes one after the other all pass.
	h.unhold(t)
	for range 3 {
		if code, _, body := fetch(t, client, p.URL+"/metrics", nil); code != http.StatusOK {
			t.Errorf("a scrape after the others ended: %d %s", code, body)
		}
	}
}

// A client that hangs up mid-scrape leaves no scrape behind: once the held
// read ends, the only slot of --web.max-requests=1 is free again and the
// next scrapes are answered in full.
func TestClientLeavingMidScrape(t *testing.T) {
	h := newHeldProc(t)
	p := testexporter.Start(t, nil, append([]string{"--path.procfs=" + h.dir, "--web.max-requests=1", heldReadTimeout}, poolOnly...)...)

	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+"/metrics", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		gone <- err
	}()
	w := h.waitReader(t)
	cancel()
	if err := <-gone; !errors.Is(err, context.Canceled) {
		t.Fatalf("the client's request ended with %v, want it cancelled", err)
	}
	h.release(t, w)
	h.unhold(t)

	client := &http.Client{Timeout: 30 * time.Second}
	var code int
	var body string
	testexporter.Eventually(t, 30*time.Second, func() bool {
		code, _, body = fetch(t, client, p.URL+"/metrics", nil)
		return code != http.StatusServiceUnavailable
	}, "the abandoned scrape to free its slot")
	if code != http.StatusOK || !strings.Contains(body, `spark_scrape_collector_success{collector="pool"} 1`) ||
		!strings.Contains(body, "promhttp_metric_handler_requests_in_flight 1\n") {
		t.Errorf("scrape after the client left: %d\n%s", code, body)
	}
}

// collect[] and exclude[] pick collectors; a name that is not a running
// collector is a 400 that says which, and never a partial 200.
func TestCollectFilters(t *testing.T) {
	p := testexporter.Start(t, nil, "--path.procfs="+fixtureDir(t, "spark"), noGPU, "--no-collector.thermal")
	client := &http.Client{Timeout: 30 * time.Second}
	ran := func(body string) []string {
		var names []string
		for _, c := range []string{"gpu", "pool", "thermal", "workloads"} {
			if strings.Contains(body, `spark_scrape_collector_success{collector="`+c+`"}`) {
				names = append(names, c)
			}
		}
		return names
	}
	for _, tc := range []struct {
		query string
		code  int
		ran   string // collectors run, or a text of the 400 answer
	}{
		{"", 200, "gpu,pool,workloads"},
		{"?collect[]=pool", 200, "pool"},
		{"?collect[]=pool&collect[]=workloads", 200, "pool,workloads"},
		{"?exclude[]=pool", 200, "gpu,workloads"},
		{"?collect[]=pool&exclude[]=pool", 200, ""},
		{"?collect[]=nosuch", 400, `unknown or disabled collector "nosuch"`},
		{"?exclude[]=nosuch", 400, `unknown or disabled collector "nosuch"`},
		{"?collect[]=thermal", 400, `unknown or disabled collector "thermal"`}, // disabled
		{"?collect[]=", 400, `unknown or disabled collector ""`},
		{"?collect[]=%3Cscript%3E", 400, `unknown or disabled collector "<script>"`},
	} {
		code, header, body := fetch(t, client, p.URL+"/metrics"+tc.query, nil)
		if code != tc.code {
			t.Errorf("%s: status %d, want %d\n%s", tc.query, code, tc.code, body)
			continue
		}
		if code == 400 {
			if !strings.Contains(body, tc.ran) || strings.Contains(body, "spark_") {
				t.Errorf("%s: answer %q, want it to say %q and carry no metrics", tc.query, body, tc.ran)
			}
			if ct := header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
				t.Errorf("%s: a 400 served as %q", tc.query, ct)
			}
			continue
		}
		if got := strings.Join(ran(body), ","); got != tc.ran {
			t.Errorf("%s: ran %q, want %q", tc.query, got, tc.ran)
		}
	}
}

// exporter-toolkit reads the web config again on every request. A config
// that breaks while the exporter runs fails closed: every request is a 500
// (never served without its authentication), the log says why without the
// file's path, and a repaired file is taken up without a restart.
func TestWebConfigBrokenMidRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "private-dir")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "web.yml")
	good := []byte("basic_auth_users:\n  " + scrapeUser + ": " + scrapeHash + "\n")
	if err := os.WriteFile(config, good, 0o600); err != nil {
		t.Fatal(err)
	}
	p := testexporter.Start(t, nil, "--path.procfs="+fixtureDir(t, "spark"), noGPU, "--web.config.file="+config)
	client := &http.Client{Timeout: 30 * time.Second}
	auth := basicAuth(scrapeUser, scrapePassword)
	expect := func(when string, want int) {
		t.Helper()
		for _, path := range []string{"/metrics", "/"} {
			code, _, body := fetch(t, client, p.URL+path, auth)
			if code != want || (code != http.StatusOK && strings.Contains(body, "spark_")) {
				t.Errorf("%s: GET %s: %d, want %d\n%s", when, path, code, want, body)
			}
		}
	}
	expect("good config", http.StatusOK)

	if err := os.WriteFile(config, []byte("basic_auth_users: [\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	expect("config no longer YAML", http.StatusInternalServerError)
	os.Remove(config)
	expect("config gone", http.StatusInternalServerError)
	if err := os.WriteFile(config, good, 0o600); err != nil {
		t.Fatal(err)
	}
	expect("config back", http.StatusOK)

	p.Stop(t)
	logs := p.Logs()
	if !strings.Contains(logs, "Unable to parse configuration") || !strings.Contains(logs, "no such file or directory") {
		t.Errorf("the broken config is not logged with its cause:\n%s", logs)
	}
	if strings.Contains(logs, "private-dir") {
		t.Errorf("the log names the config's path:\n%s", logs)
	}
}
