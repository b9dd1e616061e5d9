package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/common/config"

	"github.com/spark-exporter/spark_exporter/internal/cliflag"
	"github.com/spark-exporter/spark_exporter/internal/redact"
	"github.com/spark-exporter/spark_exporter/internal/status"
)

// statusCommand registers `spark_exporter status`, for a terminal over SSH.
// Exit status 0: the summary was printed; 1: the exporter did not answer.
func statusCommand(app *kingpin.Application) command {
	cmd := app.Command("status", "Print the status of a running exporter (its "+status.APIPath+") as a short text summary. "+
		"Basic auth: --basic-auth-user with --basic-auth-password-file or the environment variable "+statusPasswordEnv+
		", --http.config.file, or in the URL (http://user:password@host:port, which ps shows to every user).")
	base := cliflag.Value(cmd.Flag("url", "The exporter's base URL.").Default("http://127.0.0.1"+defaultPort), parseBaseURL)
	timeout := cliflag.Duration(cmd.Flag("timeout", "How long to wait for the answer.").Default("10s"))
	asJSON := cmd.Flag("json", "Print the JSON model as served.").Bool()
	httpConfig := cmd.Flag("http.config.file", "HTTP client configuration (basic auth, TLS, follow_redirects, …), as promtool and amtool take it.").PlaceHolder("FILE").String()
	user := cmd.Flag("basic-auth-user", "Basic auth user; the password from --basic-auth-password-file or the environment variable "+statusPasswordEnv+".").String()
	passwordFile := cmd.Flag("basic-auth-password-file", "File holding the basic auth password.").PlaceHolder("FILE").String()

	return func(stdout, stderr io.Writer) int {
		client, err := statusClient(*base, *httpConfig, *user, *passwordFile, *timeout)
		var body []byte
		if err == nil {
			body, err = fetchStatus(client, *base)
		}
		if err != nil {
			fmt.Fprintf(stderr, "%s status: %v\n", name, err)
			return 1
		}
		if *asJSON {
			if !json.Valid(body) {
				fmt.Fprintf(stderr, "%s status: the answer is not JSON\n", name)
				return 1
			}
			stdout.Write(body)
			return 0
		}
		var m status.Model
		if err := json.Unmarshal(body, &m); err != nil || m.APIVersion != status.APIVersion {
			fmt.Fprintf(stderr, "%s status: the answer is not a %s status model\n", name, status.APIVersion)
			return 1
		}
		if err := status.WriteText(stdout, m); err != nil {
			return 1
		}
		return 0
	}
}

func parseBaseURL(s string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSuffix(s, "/") + status.APIPath)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("want http://HOST:PORT or https://HOST:PORT")
	}
	return u, nil
}

// statusPasswordEnv holds the basic auth password where no file does: an
// environment variable is not shown by ps, as a flag or a URL is.
const statusPasswordEnv = "SPARK_EXPORTER_PASSWORD"

// statusClient is made by prometheus/common as promtool's.
func statusClient(u *url.URL, configFile, user, passwordFile string, timeout time.Duration) (*http.Client, error) {
	cfg := config.DefaultHTTPClientConfig
	given := 0
	for _, set := range []bool{configFile != "", user != "" || passwordFile != "", u.User != nil} {
		if set {
			given++
		}
	}
	switch {
	case given > 1:
		return nil, errors.New("give credentials one way: --http.config.file, --basic-auth-user, or in --url")
	case configFile != "":
		loaded, _, err := config.LoadHTTPConfigFile(configFile)
		if err != nil {
			return nil, fmt.Errorf("invalid flag --http.config.file: %w", redact.OpWithoutPath(err))
		}
		cfg = *loaded
	case user == "" && passwordFile != "":
		return nil, errors.New("invalid flag --basic-auth-password-file: give --basic-auth-user too")
	case user != "":
		cfg.BasicAuth = &config.BasicAuth{Username: user, PasswordFile: passwordFile}
		if passwordFile == "" {
			cfg.BasicAuth.Password = config.Secret(os.Getenv(statusPasswordEnv))
		}
	}
	client, err := config.NewClientFromConfig(cfg, name+"_status")
	if err != nil {
		return nil, fmt.Errorf("the HTTP client: %w", redact.OpWithoutPath(err))
	}
	client.Timeout = timeout
	return client, nil
}

// maxStatusAnswer bounds the model read: a Spark's is a few KiB.
const maxStatusAnswer = 16 << 20

// fetchStatus's errors leave the URL's credentials out; an answer beyond maxStatusAnswer is never cut.
func fetchStatus(client *http.Client, u *url.URL) ([]byte, error) {
	shown := *u
	shown.User = nil
	req, err := http.NewRequest(http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %v", shown.String(), err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("GET %s: %v", shown.String(), err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxStatusAnswer+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %v", shown.String(), err)
	}
	if len(body) > maxStatusAnswer {
		return nil, fmt.Errorf("GET %s: the answer is larger than 16 MiB, not a status model", shown.String())
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", shown.String(), resp.Status)
	}
	return body, nil
}
