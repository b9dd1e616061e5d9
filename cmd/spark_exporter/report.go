package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/client_golang/api"
	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/config"

	"github.com/spark-exporter/spark_exporter/collector"
	"github.com/spark-exporter/spark_exporter/internal/cliflag"
	"github.com/spark-exporter/spark_exporter/internal/hostfs"
	"github.com/spark-exporter/spark_exporter/internal/judge"
	"github.com/spark-exporter/spark_exporter/internal/report"
	"github.com/spark-exporter/spark_exporter/internal/thermallog"
)

// Exit statuses of the report command.
const (
	reportMade   = 0 // whatever the report says
	reportFailed = 1 // the source could not be read (Prometheus unreachable, …)
	reportUsage  = 2 // bad input: a flag, or a log with no usable line
)

// reportTimeout bounds the whole Prometheus conversation.
const reportTimeout = 2 * time.Minute

// usageError is bad input, named by its flag or line.
type usageError struct{ error }

// reportCommand registers `spark_exporter report`. It judges with the
// --thermal.* flags serve's thermal collector takes
// (collector.AddThermalFlags), so that a replay judges as the live collector does.
func reportCommand(app *kingpin.Application) command {
	cmd := app.Command("report", "Summarise one run after the fact, from a thermal log (CSV) or from Prometheus: "+
		"duration, energy, time busy and at the ~100 W plateau, throttle episodes, and from Prometheus the pool's headroom, "+
		"OOM kills, memory stalls, contention and the alerts that fired; with a one-line verdict. "+
		"Exit status 0: the report was made; 1: the source could not be read; 2: bad input.")
	file := cmd.Arg("log", "Thermal log: the guide's thermal-sample.sh CSV, nvidia-smi --query-gpu=… --format=csv[,noheader][,nounits] output, or --thermal.csv-file.").String()
	promURL := cliflag.Value(cmd.Flag("prometheus.url", "Report from this Prometheus server instead of a log.").PlaceHolder("URL"), parseURL)
	httpConfig := cmd.Flag("http.config.file", "HTTP client configuration for Prometheus (basic auth, TLS, …), as promtool and amtool take it.").PlaceHolder("FILE").String()
	user := cmd.Flag("prometheus.basic-auth-user", "Basic auth user for Prometheus.").String()
	passwordFile := cmd.Flag("prometheus.basic-auth-password-file", "File holding the basic auth password for Prometheus.").PlaceHolder("FILE").String()
	caFile := cmd.Flag("prometheus.tls-ca-file", "CA certificate to verify Prometheus's.").PlaceHolder("FILE").String()
	certFile := cmd.Flag("prometheus.tls-cert-file", "Client certificate for Prometheus.").PlaceHolder("FILE").String()
	keyFile := cmd.Flag("prometheus.tls-key-file", "Client key for Prometheus.").PlaceHolder("FILE").String()
	instance := cmd.Flag("instance", "The Spark's instance label (default: the only one there is).").String()
	gpu := cliflag.Value(cmd.Flag("gpu", "GPU index (default: 0, or a log's lowest index)."), parseGPU)
	fromFlag := cliflag.Value(cmd.Flag("from", "Start of the run (RFC 3339, e.g. 2025-11-24T14:00:00Z, or Unix seconds)."), parseTime)
	toFlag := cliflag.Value(cmd.Flag("to", "End of the run (RFC 3339 or Unix seconds; default: now)."), parseTime)
	last := cliflag.Duration(cmd.Flag("last", "The run is the last this long before --to (default 6h when --from is not given).").PlaceHolder("6h"))
	step := cliflag.Duration(cmd.Flag("step", "Resolution of Prometheus queries (default: 1s, coarser past 10,000 points)."))
	asJSON := cmd.Flag("json", "Print the report as JSON (docs/report.md).").Bool()
	thermal := collector.AddThermalFlags(cmd)
	svgFile := cmd.Flag("svg", "Also draw temperature, power and SM clock over the run, throttle episodes shaded, to this SVG file.").PlaceHolder("FILE").String()

	return func(stdout, stderr io.Writer) int {
		cfg, err := thermal.Config()
		if err != nil {
			err = usageError{err}
		}
		var r report.Report
		if err == nil {
			switch {
			case *file != "" && *promURL != "":
				err = usageError{errors.New("give a log or --prometheus.url, not both")}
			case *file != "":
				r, err = reportLog(*file, *gpu, cfg, stderr)
			case *promURL != "":
				var q report.Query
				var rt httpOptions
				q, err = reportQuery(*instance, *gpu, *fromFlag, *toFlag, *last, *step, time.Now())
				rt = httpOptions{*httpConfig, *user, *passwordFile, *caFile, *certFile, *keyFile}
				if err == nil {
					r, err = reportPrometheus(*promURL, rt, q, cfg)
				}
			default:
				err = usageError{errors.New("give a thermal log, or --prometheus.url")}
			}
		}
		if err == nil {
			if *asJSON {
				err = r.WriteJSON(stdout)
			} else {
				err = r.WriteText(stdout)
			}
		}
		if err == nil && *svgFile != "" {
			err = writeSVG(*svgFile, r)
		}
		var ue usageError
		switch {
		case errors.As(err, &ue):
			fmt.Fprintf(stderr, "%s: error: %v; try --help\n", name, err)
			return reportUsage
		case err != nil:
			fmt.Fprintf(stderr, "%s: error: %v\n", name, err)
			return reportFailed
		}
		return reportMade
	}
}

// reportLog reports on a thermal log. Malformed lines are listed on stderr
// and skipped; a log with no usable line is bad input, named by its first
// malformed line.
func reportLog(path string, gpu *int, cfg judge.ThermalConfig, stderr io.Writer) (report.Report, error) {
	f, err := os.Open(path)
	if err != nil {
		return report.Report{}, usageError{fmt.Errorf("cannot read the log: %w", hostfs.OpWithoutPath(err))}
	}
	defer f.Close()
	tr, err := thermallog.Parse(f)
	var malformed thermallog.MalformedError
	if err != nil && !errors.As(err, &malformed) {
		return report.Report{}, usageError{fmt.Errorf("cannot read the log: %w", hostfs.OpWithoutPath(err))}
	}
	for _, e := range malformed {
		fmt.Fprintf(stderr, "%s: warning: %v; line skipped\n", name, e)
	}
	r, err := report.FromLog(tr, cfg, gpu)
	if err != nil {
		return r, usageError{fmt.Errorf("--thermal.window: %w", err)}
	}
	if r.Samples == 0 && len(malformed) > 0 {
		return r, usageError{fmt.Errorf("no usable line in the log; the first malformed one: %v", malformed[0])}
	}
	return r, nil
}

// reportQuery makes the query from the flags (zero when not given); now
// is the default end.
func reportQuery(instance string, gpu *int, from, to time.Time, last, step time.Duration, now time.Time) (report.Query, error) {
	q := report.Query{Instance: instance, GPU: "0", From: from, To: to, Step: step}
	if gpu != nil {
		q.GPU = strconv.Itoa(*gpu)
	}
	if q.To.IsZero() {
		q.To = now
	}
	switch {
	case !from.IsZero() && last != 0:
		return q, usageError{errors.New("give --from or --last, not both")}
	case from.IsZero() && last == 0:
		q.From = q.To.Add(-6 * time.Hour)
	case from.IsZero():
		q.From = q.To.Add(-last)
	}
	if !q.To.After(q.From) {
		return q, usageError{errors.New("invalid flag --from: the run must start before --to")}
	}
	if step != 0 && q.To.Sub(q.From)/step > 11000 {
		return q, usageError{errors.New("invalid flag --step: more than 11,000 points over the run (Prometheus's limit)")}
	}
	return q, nil
}

// parseTime takes RFC 3339 or Unix seconds, as promtool does.
func parseTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if secs, err := strconv.ParseFloat(s, 64); err == nil && secs >= 0 && secs < 1e11 {
		return time.Unix(0, int64(secs*1e9)), nil
	}
	return time.Time{}, fmt.Errorf("%q is neither RFC 3339 (2025-11-24T14:00:00Z) nor Unix seconds", s)
}

func parseGPU(s string) (*int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 1<<16 {
		return nil, fmt.Errorf("%q is not a GPU index", s)
	}
	return &n, nil
}

func parseURL(s string) (string, error) {
	if u, err := url.Parse(s); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%q is not an http(s) URL", s)
	}
	return s, nil
}

// httpOptions are the ways to reach a Prometheus behind auth or TLS.
type httpOptions struct {
	configFile, user, passwordFile, caFile, certFile, keyFile string
}

func (o httpOptions) client() (config.HTTPClientConfig, error) {
	cfg := config.DefaultHTTPClientConfig
	if o.configFile != "" {
		if o.user != "" || o.passwordFile != "" || o.caFile != "" || o.certFile != "" || o.keyFile != "" {
			return cfg, usageError{errors.New("give --http.config.file or the --prometheus.basic-auth-* and --prometheus.tls-* flags, not both")}
		}
		loaded, _, err := config.LoadHTTPConfigFile(o.configFile)
		if err != nil {
			return cfg, usageError{fmt.Errorf("invalid flag --http.config.file: %w", hostfs.OpWithoutPath(err))}
		}
		return *loaded, nil
	}
	if o.user != "" || o.passwordFile != "" {
		if o.user == "" {
			return cfg, usageError{errors.New("invalid flag --prometheus.basic-auth-password-file: give --prometheus.basic-auth-user too")}
		}
		cfg.BasicAuth = &config.BasicAuth{Username: o.user, PasswordFile: o.passwordFile}
	}
	cfg.TLSConfig = config.TLSConfig{CAFile: o.caFile, CertFile: o.certFile, KeyFile: o.keyFile}
	if err := cfg.Validate(); err != nil {
		return cfg, usageError{fmt.Errorf("--prometheus.tls-* flags: %w", err)}
	}
	return cfg, nil
}

func reportPrometheus(address string, o httpOptions, q report.Query, cfg judge.ThermalConfig) (report.Report, error) {
	httpCfg, err := o.client()
	if err != nil {
		return report.Report{}, err
	}
	rt, err := config.NewRoundTripperFromConfig(httpCfg, name+"_report")
	if err != nil {
		return report.Report{}, usageError{fmt.Errorf("the Prometheus HTTP client: %w", err)}
	}
	client, err := api.NewClient(api.Config{Address: address, RoundTripper: rt})
	if err != nil {
		return report.Report{}, usageError{fmt.Errorf("invalid flag --prometheus.url: %w", err)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), reportTimeout)
	defer cancel()
	r, err := report.FromPrometheus(ctx, v1.NewAPI(client), q, cfg)
	if errors.Is(err, report.ErrInstance) {
		return r, usageError{fmt.Errorf("--%w", err)}
	}
	return r, err
}

// writeSVG draws the report's picture into path.
func writeSVG(path string, r report.Report) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--svg: %w", hostfs.OpWithoutPath(err))
	}
	if err := r.WriteSVG(f); err != nil {
		f.Close()
		return fmt.Errorf("--svg: %w", err)
	}
	return hostfs.OpWithoutPath(f.Close())
}
