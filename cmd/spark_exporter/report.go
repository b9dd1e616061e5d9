package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
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
	"github.com/spark-exporter/spark_exporter/internal/gpu"
	"github.com/spark-exporter/spark_exporter/internal/judge"
	"github.com/spark-exporter/spark_exporter/internal/redact"
	"github.com/spark-exporter/spark_exporter/internal/report"
	"github.com/spark-exporter/spark_exporter/internal/thermallog"
)

const (
	reportMade   = 0 // whatever the report says
	reportFailed = 1 // the source could not be read (Prometheus unreachable, …)
	reportUsage  = 2 // bad input: a flag, or a log with no usable line
)

const reportTimeout = 2 * time.Minute

type usageError struct{ error }

// reportCommand takes the --thermal.* flags, so that a replay judges as the live collector does.
func reportCommand(app *kingpin.Application) command {
	cmd := app.Command("report", "Summarise one run after the fact, from a thermal log (CSV) or from Prometheus: "+
		"duration, energy, time busy and at the ~100 W plateau, throttle episodes, and from Prometheus the pool's headroom, "+
		"OOM kills, memory stalls, contention and the alerts that fired; with a one-line verdict. "+
		"Exit status 0: the report was made; 1: the source (the log file, Prometheus) could not be read; 2: bad input (a flag, or a log the report cannot read).")
	file := cmd.Arg("log", "Thermal log: the guide's thermal-sample.sh CSV, nvidia-smi --query-gpu=… --format=csv[,noheader][,nounits] output, nvidia-smi dmon output, or --thermal.csv-file.").String()
	zone := cliflag.Value(cmd.Flag("timezone", "Time zone of a log's timestamps written without an offset (nvidia-smi prints local time), e.g. Europe/Paris or UTC (default: this machine's).").PlaceHolder("ZONE"), parseZone)
	logInterval := cliflag.Value(cmd.Flag("log.interval", "Interval of a log without timestamps (nvidia-smi dmon without -o DT: its -d, 1s by default; a --query-gpu CSV without a timestamp column), at most 1h; its last row is taken to be the file's modification time, or --from its first.").PlaceHolder("1s"), parseLogInterval)
	columns := cliflag.Value(cmd.Flag("columns", "The log's columns in order, by their nvidia-smi --query-gpu names (timestamp, temperature.gpu, power.draw, clocks.sm, utilization.gpu, index, name, power.limit, …; elapsed_s: seconds since --from), for a --format=csv,noheader capture or in place of its header, e.g. --columns=timestamp,clocks.sm,temperature.gpu,power.draw,utilization.gpu. A name the report does not read is a column it skips.").PlaceHolder("LIST"), thermallog.ParseColumns)
	gpuName := cmd.Flag("gpu.name", "The GPU's model for a log without a name column, e.g. \"NVIDIA GB10\": GB10's 240 W rating and ~100 W plateau apply to a GB10 only.").PlaceHolder("NAME").String()
	powerLimit := cliflag.Value(cmd.Flag("gpu.power-limit", "The GPU's power rating in W for a log without a power.limit column (another GPU than a GB10): the throttle signature judges power flat below it.").PlaceHolder("WATTS"), parseWatts)
	promURL := cliflag.Value(cmd.Flag("prometheus.url", "Report from this Prometheus server instead of a log.").PlaceHolder("URL"), parseURL)
	httpConfig := cmd.Flag("http.config.file", "HTTP client configuration for Prometheus (basic auth, TLS, …), as promtool and amtool take it.").PlaceHolder("FILE").String()
	user := cmd.Flag("prometheus.basic-auth-user", "Basic auth user for Prometheus; the password from --prometheus.basic-auth-password-file or the environment variable "+prometheusPasswordEnv+".").String()
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
	flightFlags := addReportFlightFlags(cmd)
	svgFile := cmd.Flag("svg", "Also draw temperature, power and SM clock over the run, throttle episodes shaded, to this SVG file.").PlaceHolder("FILE").String()

	return func(stdout, stderr io.Writer) int {
		if *flightFlags.on {
			return reportFlight(app, flightFlags, *file, *fromFlag, *toFlag, *last, *zone, *asJSON, *svgFile, stdout, stderr)
		}
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
				index := 0
				if *gpu != nil {
					index = **gpu
				}
				opt := logOptions{gpu: report.LogOptions{GPU: *gpu, GPUName: *gpuName, PowerLimit: *powerLimit, MachineGPU: func() string { return machineGPU(index) }},
					parse: thermallog.Options{Location: *zone, Interval: *logInterval, Columns: *columns}, from: *fromFlag}
				r, err = reportLog(*file, opt, cfg, stderr)
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
			err = writeReport(r, *asJSON, *svgFile, stdout)
		}
		return reportExit(err, stderr)
	}
}

func writeReport(r report.Report, asJSON bool, svgFile string, stdout io.Writer) error {
	var err error
	if asJSON {
		err = r.WriteJSON(stdout)
	} else {
		err = r.WriteText(stdout)
	}
	if err == nil && svgFile != "" {
		err = writeSVG(svgFile, r)
	}
	return err
}

func reportExit(err error, stderr io.Writer) int {
	var ue usageError
	var se sourceError
	switch {
	case errors.As(err, &se):
		fmt.Fprintf(stderr, "%s: error: %v\n", name, err)
		return reportFailed
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "%s: error: %v; try --help\n", name, err)
		return reportUsage
	case err != nil:
		fmt.Fprintf(stderr, "%s: error: %v\n", name, err)
		return reportFailed
	}
	return reportMade
}

type logOptions struct {
	gpu   report.LogOptions
	parse thermallog.Options
	from  time.Time // the first row's time, for a log without timestamps
}

type sourceError struct{ error }

// reportLog reads the log as a stream, so that memory is bounded by the window, not the file.
func reportLog(path string, opt logOptions, cfg judge.ThermalConfig, stderr io.Writer) (report.Report, error) {
	f, err := os.Open(path)
	if err != nil {
		return report.Report{}, sourceError{fmt.Errorf("cannot read the log %q: %w", path, redact.OpWithoutPath(err))}
	}
	defer f.Close()
	var first, last time.Time
	rows := 0
	tr, err := thermallog.ParseEach(f, opt.parse, func(r thermallog.Row) {
		if rows == 0 {
			first = r.Time
		}
		last = r.Time
		rows++
	})
	var malformed thermallog.MalformedError
	var format *thermallog.FormatError
	switch {
	case errors.As(err, &format):
		return report.Report{}, usageError{fmt.Errorf("cannot read the log %q: %w", path, err)}
	case err != nil && !errors.As(err, &malformed):
		return report.Report{}, sourceError{fmt.Errorf("cannot read the log %q: %w", path, redact.OpWithoutPath(err))}
	}
	// A log of bad lines costs no output per line.
	for _, e := range malformed.Lines {
		fmt.Fprintf(stderr, "%s: warning: %v; line skipped\n", name, e)
	}
	if more := malformed.Total - len(malformed.Lines); more > 0 {
		fmt.Fprintf(stderr, "%s: warning: %d more malformed lines skipped\n", name, more)
	}
	var shift time.Duration
	if tr.Relative && rows > 0 {
		// Rows timed from the epoch: the first at --from (elapsed_s counts
		// from it), or the last at the file's modification time.
		shift = opt.from.Sub(first)
		if tr.Elapsed {
			shift = opt.from.Sub(time.Unix(0, 0))
		}
		if opt.from.IsZero() {
			if info, err := f.Stat(); err == nil {
				shift = info.ModTime().Truncate(time.Second).Sub(last)
			}
		}
	}
	source := func(yield func(thermallog.Row)) error {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return sourceError{fmt.Errorf("cannot read the log %q again: %w", path, redact.OpWithoutPath(err))}
		}
		_, err := thermallog.ParseEach(f, opt.parse, func(r thermallog.Row) {
			r.Time = r.Time.Add(shift)
			yield(r)
		})
		if err != nil && !errors.As(err, &malformed) {
			return sourceError{fmt.Errorf("cannot read the log %q again: %w", path, redact.OpWithoutPath(err))}
		}
		return nil
	}
	r, err := report.FromRows(tr, source, cfg, opt.gpu)
	var se sourceError
	switch {
	case errors.As(err, &se):
		return r, err
	case errors.Is(err, report.ErrNoSample) && malformed.Total > 0:
		return r, usageError{fmt.Errorf("no usable line in the log; the first malformed one: %v", malformed.Lines[0])}
	case err != nil:
		return r, usageError{err}
	}
	return r, nil
}

// machineGPU is "" where NVML is not there or does not answer within a few seconds.
func machineGPU(index int) string {
	c := gpu.New(gpu.Options{InitTimeout: 2 * time.Second})
	defer c.Close()
	if !c.Up() {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	snap, err := c.Snapshot(ctx)
	if err != nil {
		return ""
	}
	for _, d := range snap.Devices {
		if d.Index == index {
			return d.Name
		}
	}
	return ""
}

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

// parseZone's error does not repeat the name (the flag's error quotes it, escaped).
func parseZone(s string) (*time.Location, error) {
	loc, err := time.LoadLocation(s)
	if err != nil {
		return nil, errors.New("not a time zone name like Europe/Paris or UTC")
	}
	return loc, nil
}

// maxLogInterval: rows timed by a larger one would soon run past the years a time holds.
const maxLogInterval = time.Hour

func parseLogInterval(s string) (time.Duration, error) {
	d, err := cliflag.ParsePositiveDuration(s)
	if err == nil && d > maxLogInterval {
		err = fmt.Errorf("longer than %v", maxLogInterval)
	}
	return d, err
}

// parseTime takes RFC 3339 or Unix seconds, as promtool does.
func parseTime(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, thermallog.PlausibleTime(t)
	}
	if secs, err := strconv.ParseFloat(s, 64); err == nil && secs >= 0 && secs < 1e11 {
		// Seconds and nanoseconds apart: 1e11 s is past what int64
		// nanoseconds hold (year 2262).
		whole := math.Floor(secs)
		t := time.Unix(int64(whole), int64((secs-whole)*1e9))
		return t, thermallog.PlausibleTime(t)
	}
	return time.Time{}, fmt.Errorf("%q is neither RFC 3339 (2025-11-24T14:00:00Z) nor Unix seconds", s)
}

func parseWatts(s string) (float64, error) {
	w, err := strconv.ParseFloat(s, 64)
	if err != nil || !(w > 0 && w <= thermallog.MaxPower) {
		return 0, fmt.Errorf("%q is not a power in W", s)
	}
	return w, nil
}

func parseGPU(s string) (*int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > 1<<16 {
		return nil, fmt.Errorf("%q is not a GPU index", s)
	}
	return &n, nil
}

// parseURL's error does not quote the URL (the flag's does, without credentials).
func parseURL(s string) (string, error) {
	if u, err := url.Parse(s); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", errors.New("not an http(s) URL")
	}
	return s, nil
}

// prometheusPasswordEnv holds the basic auth password for Prometheus where
// no file does: an environment variable is not shown by ps, as a flag is.
const prometheusPasswordEnv = "SPARK_PROMETHEUS_PASSWORD"

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
			return cfg, usageError{fmt.Errorf("invalid flag --http.config.file: %w", redact.OpWithoutPath(err))}
		}
		return *loaded, nil
	}
	if o.user != "" || o.passwordFile != "" {
		if o.user == "" {
			return cfg, usageError{errors.New("invalid flag --prometheus.basic-auth-password-file: give --prometheus.basic-auth-user too")}
		}
		cfg.BasicAuth = &config.BasicAuth{Username: o.user, PasswordFile: o.passwordFile}
		if o.passwordFile == "" {
			cfg.BasicAuth.Password = config.Secret(os.Getenv(prometheusPasswordEnv))
		}
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
	// A client, not a round tripper: follow_redirects: false is honoured
	// only by a client made from the configuration.
	httpClient, err := config.NewClientFromConfig(httpCfg, name+"_report")
	if err != nil {
		return report.Report{}, usageError{fmt.Errorf("the Prometheus HTTP client: %w", redact.OpWithoutPath(err))}
	}
	httpClient.Transport = cappedTransport{httpClient.Transport}
	client, err := api.NewClient(api.Config{Address: address, Client: httpClient})
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

func writeSVG(path string, r report.Report) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--svg: %w", redact.OpWithoutPath(err))
	}
	if err := r.WriteSVG(f); err != nil {
		f.Close()
		return fmt.Errorf("--svg: %w", err)
	}
	return redact.OpWithoutPath(f.Close())
}

// maxAnswerBytes: the largest answer, a series of 11,000 points, is well under 1 MiB.
const maxAnswerBytes = 16 << 20

var errAnswerTooLarge = fmt.Errorf("the answer is over %d MiB", maxAnswerBytes>>20)

type cappedTransport struct{ http.RoundTripper }

func (c cappedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.RoundTripper.RoundTrip(req)
	if err == nil {
		resp.Body = &cappedBody{ReadCloser: resp.Body}
	}
	return resp, err
}

type cappedBody struct {
	io.ReadCloser
	read int64
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if left := maxAnswerBytes + 1 - b.read; int64(len(p)) > left {
		p = p[:left]
	}
	n, err := b.ReadCloser.Read(p)
	b.read += int64(n)
	if b.read > maxAnswerBytes {
		return 0, errAnswerTooLarge
	}
	return n, err
}
