package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/common/version"
	"github.com/prometheus/exporter-toolkit/web"
	"github.com/prometheus/exporter-toolkit/web/kingpinflag"

	"github.com/spark-exporter/spark_exporter/collector"
	"github.com/spark-exporter/spark_exporter/internal/cliflag"
	"github.com/spark-exporter/spark_exporter/internal/connlimit"
	"github.com/spark-exporter/spark_exporter/internal/gpu"
	"github.com/spark-exporter/spark_exporter/internal/hostfs"
	"github.com/spark-exporter/spark_exporter/internal/logging"
	"github.com/spark-exporter/spark_exporter/internal/readonly"
	"github.com/spark-exporter/spark_exporter/internal/status"
)

// serveFlags are serve's own flags.
type serveFlags struct {
	web                    *web.FlagConfig
	metricsPath            *string
	disableExporterMetrics *bool
	maxRequests            *int
	maxProcs               *int
	maxConnections         *int
	webReadTimeout         *time.Duration
	idleTimeout            *time.Duration
	logConfig              logging.Config
	gpu                    *gpu.Flags
	selection              *collector.Selection
}

func addServeFlags(cmd *kingpin.CmdClause) *serveFlags {
	f := &serveFlags{web: kingpinflag.AddFlags(cmd, defaultPort)}
	// The toolkit's help gives :9100 as its example, inside the range this
	// exporter keeps out of (defaultPort): name ours instead.
	cmd.GetFlag("web.listen-address").Help("Addresses on which to expose metrics and web interface. Repeatable for multiple addresses. " +
		"Examples: `" + defaultPort + "` or `[::1]" + defaultPort + "` for http, `vsock://" + defaultPort + "` for vsock.")
	f.metricsPath = cliflag.Value(cmd.Flag("web.telemetry-path", "Path under which to expose metrics.").Default("/metrics"), parseURLPath)
	f.disableExporterMetrics = cmd.Flag("web.disable-exporter-metrics",
		"Exclude metrics about the exporter itself (promhttp_*, process_*, go_*).").Bool()
	f.maxRequests = cliflag.Int(cmd.Flag("web.max-requests",
		"Maximum number of parallel scrape requests; 0 disables the limit.").Default("40"), 0, 1<<20)
	// One thread by default, as in node_exporter: a scrape is a millisecond
	// of mostly system calls, which more threads only hand around at a cost
	// (docs/performance.md).
	f.maxProcs = cliflag.Int(cmd.Flag("runtime.gomaxprocs",
		"The number of CPUs Go code runs on at once (GOMAXPROCS).").Envar("GOMAXPROCS").Default("1"), 1, 1<<16)
	f.maxConnections = cliflag.Int(cmd.Flag("web.max-connections",
		"Maximum number of open client connections. Each holds a file descriptor, which the collectors need too. "+
			"At the limit, one holding its place without use is closed to make room (idle between requests, new and silent "+
			"for a second, or a request that has moved no byte for a second; of the client holding the most, idle first, "+
			"then the oldest); when all are being answered, more wait to be accepted.").Default("64"), 1, 1<<20)
	f.webReadTimeout = cliflag.Duration(cmd.Flag("web.read-timeout",
		"Deadline for reading a whole request, headers included; a client slower than this is disconnected.").Default("10s"))
	f.idleTimeout = cliflag.Duration(cmd.Flag("web.idle-timeout",
		"How long a keep-alive connection may wait for its next request; above the scrape interval, so that Prometheus reuses its connection.").Default("2m"))
	f.logConfig = logging.AddFlags(cmd)
	f.gpu = gpu.AddFlags(cmd)
	f.selection = collector.AddFlags(cmd)
	return f
}

// serveCommand returns the command that serves metrics until SIGINT or SIGTERM.
func serveCommand(cmd *kingpin.CmdClause, procfs, sysfs *string, readTimeout *time.Duration) command {
	f := addServeFlags(cmd)

	return func(stdout, stderr io.Writer) int {
		runtime.GOMAXPROCS(*f.maxProcs)
		logger, slogger := logging.New(stderr, f.logConfig)
		level.Info(logger).Log("msg", "Starting "+name, "version", version.Info())
		level.Info(logger).Log("msg", "Build context", "build_context", version.BuildContext())

		if err := checkStart(*f.web.WebConfigFile, *procfs, *sysfs); err != nil {
			level.Error(logger).Log("msg", "cannot start", "err", err)
			return 1
		}
		// Listening first: the engines collector is built knowing the
		// ports it must never ask.
		listeners, ports, err := listen(f.web, *f.maxConnections)
		if err != nil {
			level.Error(logger).Log("msg", "cannot serve; check --web.listen-address", "err", err)
			return 1
		}
		exporter, closeCollectors, err := buildExporter(f.selection, f.gpu.Settings(), collector.Env{
			ProcFS: *procfs, SysFS: *sysfs, ReadTimeout: *readTimeout, Logger: logger, OwnPorts: ports})
		if err != nil {
			closeListeners(listeners)
			level.Error(logger).Log("msg", "cannot start", "err", err)
			return 1
		}
		// Closed within the shutdown grace: a collector stuck in a read
		// or in NVML must not hold the exit (shutdown below).
		shutDown := false
		defer func() {
			if !shutDown {
				closeCollectors()
			}
		}()
		for _, c := range exporter.Names() {
			level.Info(logger).Log("msg", "collector enabled", "collector", c)
		}
		if exporter.Awaited() {
			// The flight recorder's first record is of this collection:
			// it never runs the collectors itself.
			exporter.Refresh()
		}

		server := newServer(serveMux(exporter, f, logger), f)
		// Caught before the listener is announced: a signal sent once
		// "Listening on" shows is handled.
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
		defer signal.Stop(stop)
		served := make(chan error, 1)
		go func() {
			served <- serveBounded(server, f.web, listeners, withWebConfigRedacted(slogger, *f.web.WebConfigFile))
		}()

		for {
			select {
			case err := <-served:
				level.Error(logger).Log("msg", "cannot serve; check --web.listen-address", "err", err)
				return 1
			case sig := <-stop:
				if sig == syscall.SIGHUP {
					// SIGHUP's default is a silent exit (a closed terminal,
					// a reload habit), and there is nothing to reload.
					level.Info(logger).Log("msg", "SIGHUP received: nothing to reload (--web.config.file is read at every request; flags need a restart); carrying on")
					continue
				}
				level.Info(logger).Log("msg", "shutting down", "signal", sig.String())
			}
			break
		}
		shutDown = true
		shutdown(server, served, closeCollectors, logger)
		return 0
	}
}

// checkStart checks at start what a mistake would otherwise show only later:
// the web configuration and the mount points, naming the flag, not the path.
func checkStart(webConfigFile, procfs, sysfs string) error {
	if err := checkWebConfig(webConfigFile); err != nil {
		return err
	}
	for _, mount := range []struct{ flag, dir string }{{"--path.procfs", procfs}, {"--path.sysfs", sysfs}} {
		if err := hostfs.New(mount.dir).CheckRoot(); err != nil {
			return errors.New(mount.flag + ": " + err.Error())
		}
	}
	return nil
}

// serveMux routes the metrics and the status page, which counts against
// the same --web.max-requests.
func serveMux(exporter *collector.Exporter, f *serveFlags, logger log.Logger) *http.ServeMux {
	mux := http.NewServeMux()
	metrics := newMetricsHandler(exporter, !*f.disableExporterMetrics, *f.maxRequests, logger)
	mux.Handle(*f.metricsPath, metrics)
	for pattern, h := range statusRoutes(exporter, *f.metricsPath, status.DefaultMaxAge) {
		mux.Handle(pattern, metrics.limit(h))
	}
	if *f.metricsPath != sdPath {
		mux.Handle(sdPath, metrics.limit(engineSD(exporter)))
	}
	return mux
}

func newServer(mux *http.ServeMux, f *serveFlags) *http.Server {
	return &http.Server{
		// Only GET and HEAD on every endpoint: a scrape reads. Each
		// response is made whole before it is sent, one at a time.
		Handler:           readonly.Handler(oneAnswerAtATime(whole(mux))),
		ConnContext:       withConn,
		ReadHeaderTimeout: min(*f.webReadTimeout, requestHeaderTimeout),
		ReadTimeout:       *f.webReadTimeout,
		// Which connections may be closed to make room (serveBounded).
		ConnState: connlimit.Track,
		// A scrape answers within its read deadlines; the response, once
		// made, has responseWriteTimeout (whole).
		WriteTimeout: time.Minute,
		IdleTimeout:  *f.idleTimeout,
	}
}

// requestHeaderTimeout bounds the wait for a request's headers: a scraper
// sends them at once, so a connection silent for seconds is holding a slot.
const requestHeaderTimeout = 5 * time.Second

// listen opens listeners that each accept at most maxConnections
// (connlimit), so that idle or slow connections never take the descriptors
// the collectors need, and returns the ports they listen at. Under systemd
// socket activation or with vsock it opens none: the toolkit listens
// itself, without the bound.
func listen(flags *web.FlagConfig, maxConnections int) ([]net.Listener, []int, error) {
	addresses := *flags.WebListenAddresses
	if (flags.WebSystemdSocket != nil && *flags.WebSystemdSocket) || len(addresses) == 0 ||
		slices.ContainsFunc(addresses, func(a string) bool { return strings.HasPrefix(a, "vsock://") }) {
		return nil, nil, nil
	}
	listeners := make([]net.Listener, 0, len(addresses))
	var ports []int
	for _, address := range addresses {
		l, err := net.Listen("tcp", address)
		if err != nil {
			closeListeners(listeners)
			return nil, nil, err
		}
		listeners = append(listeners, connlimit.New(l, maxConnections))
		if a, ok := l.Addr().(*net.TCPAddr); ok {
			ports = append(ports, a.Port)
		}
	}
	return listeners, ports, nil
}

func closeListeners(listeners []net.Listener) {
	for _, l := range listeners {
		l.Close()
	}
}

// serveBounded serves on listen's listeners through exporter-toolkit's
// ServeMultiple; without any, the toolkit listens itself.
func serveBounded(server *http.Server, flags *web.FlagConfig, listeners []net.Listener, logger *slog.Logger) error {
	if listeners == nil {
		return web.ListenAndServe(server, flags, logger)
	}
	defer closeListeners(listeners)
	return web.ServeMultiple(listeners, server, flags, logger)
}

// shutdownGrace is how long the exporter waits, after SIGTERM, for the
// scrapes in flight to end and the collectors to close; whatever is still
// stuck then (a blocked read, NVML) is left behind by the exit, status 0.
const shutdownGrace = 5 * time.Second

// shutdown stops the server, then closes the collectors, within shutdownGrace.
func shutdown(server *http.Server, served <-chan error, closeCollectors func(), logger log.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := server.Shutdown(ctx); err != nil {
		level.Warn(logger).Log("msg", "scrapes still running at shutdown", "err", err)
	}
	select {
	case err := <-served:
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			level.Error(logger).Log("msg", "server stopped", "err", err)
		}
	case <-ctx.Done():
	}
	closed := make(chan struct{})
	go func() {
		closeCollectors()
		close(closed)
	}()
	select {
	case <-closed:
	case <-ctx.Done():
		level.Warn(logger).Log("msg", "collectors still closing at exit: a read or NVML call is stuck", "grace", shutdownGrace)
	}
}

// buildExporter builds the enabled collectors, first opening the NVML client
// when one of them reads it: there is one per process (gpu.Settings.Open).
// The returned function closes the collectors, then the client.
func buildExporter(selection *collector.Selection, settings gpu.Settings, env collector.Env) (*collector.Exporter, func(), error) {
	logger := env.Logger
	env.GPU = settings
	var client *gpu.Client
	if selection.NeedsNVML() {
		client = settings.Open(log.With(logger, "component", "nvml"))
		env.NVML = client
	}
	closeNVML := func() {
		if client == nil {
			return
		}
		if err := client.Close(); err != nil {
			level.Warn(logger).Log("msg", "closing NVML", "err", err)
		}
	}
	exporter, err := selection.Build(env)
	if err != nil {
		closeNVML()
		return nil, nil, err
	}
	return exporter, func() {
		if err := exporter.Close(); err != nil {
			level.Error(logger).Log("msg", "closing collectors", "err", err)
		}
		closeNVML()
	}, nil
}

// parseURLPath accepts a URL path to serve at. http.ServeMux panics on a
// pattern without a leading slash, and reads a space as a method and braces
// as wildcards: such a path is refused at start instead.
func parseURLPath(s string) (string, error) {
	if !strings.HasPrefix(s, "/") {
		return "", errors.New("must start with /")
	}
	if i := strings.IndexFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f || r == '{' || r == '}' }); i >= 0 {
		return "", errors.New("must not hold spaces, control characters or braces")
	}
	return s, nil
}
