package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/spark-exporter/spark_exporter/internal/cliflag"
	"github.com/spark-exporter/spark_exporter/internal/status"
)

// statusCommand registers `spark_exporter status`: the status page of a
// running exporter (its /api/v1/status) as a short text report, for a
// terminal over SSH. Exit status 0: the report was printed; 1: the exporter
// did not answer with a status.
func statusCommand(app *kingpin.Application) command {
	cmd := app.Command("status", "Print the status of a running exporter (its "+status.APIPath+") as a short text report. "+
		"Basic auth credentials go in the URL (http://user:password@host:port).")
	base := cliflag.Value(cmd.Flag("url", "The exporter's base URL.").Default("http://127.0.0.1"+defaultPort), parseBaseURL)
	timeout := cliflag.Duration(cmd.Flag("timeout", "How long to wait for the answer.").Default("10s"))
	asJSON := cmd.Flag("json", "Print the JSON model as served.").Bool()

	return func(stdout, stderr io.Writer) int {
		body, err := fetchStatus(*base, *timeout)
		if err != nil {
			fmt.Fprintf(stderr, "%s status: %v\n", name, err)
			return 1
		}
		if *asJSON {
			stdout.Write(body)
			return 0
		}
		var m status.Model
		if err := json.Unmarshal(body, &m); err != nil || m.APIVersion != status.APIVersion {
			fmt.Fprintf(stderr, "%s status: the answer is not a %s status model\n", name, status.APIVersion)
			return 1
		}
		if err := status.Report(stdout, m); err != nil {
			return 1
		}
		return 0
	}
}

// parseBaseURL accepts an http or https URL with a host.
func parseBaseURL(s string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSuffix(s, "/") + status.APIPath)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("want http://HOST:PORT or https://HOST:PORT")
	}
	return u, nil
}

// fetchStatus gets the model's JSON from the exporter at u. Errors leave
// the URL's credentials out.
func fetchStatus(u *url.URL, timeout time.Duration) ([]byte, error) {
	shown := *u
	shown.User = nil
	client := &http.Client{Timeout: timeout}
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
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %v", shown.String(), err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", shown.String(), resp.Status)
	}
	return body, nil
}
