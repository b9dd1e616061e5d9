// Package collector holds the exporter's collectors and the registry that
// runs them, in node_exporter's shape: one file per collector, registered in
// init() with its flags and --[no-]collector.NAME. A failing collector never
// hides the others.
package collector

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/alecthomas/kingpin/v2"
	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/spark-exporter/spark_exporter/internal/collected"
	"github.com/spark-exporter/spark_exporter/internal/engine"
	"github.com/spark-exporter/spark_exporter/internal/gpu"
	"github.com/spark-exporter/spark_exporter/internal/gpu/readings"
	"github.com/spark-exporter/spark_exporter/internal/hostfs"
	"github.com/spark-exporter/spark_exporter/internal/redact"

	"github.com/spark-exporter/spark_exporter/internal/cliflag"
)

// Collector is one source of metrics, read afresh on every scrape. Its
// Factory starts any background work it needs; an io.Closer's Close stops it.
type Collector interface {
	// Update sends this scrape's metrics and stores its result in
	// Env.Results; an error fails it for this scrape, keeping what was sent.
	// ctx's deadline bounds file reads; NVML's is --gpu.timeout, on its worker.
	Update(ctx context.Context, ch chan<- prometheus.Metric) error
}

// errNoData means the collector has nothing to report on this host: not a failure.
var errNoData = errors.New("collector returned no data")

// Env is what every collector may need besides its own flags (Setup).
type Env struct {
	ProcFS, SysFS string
	// ReadTimeout is --path.read-timeout (hostfs.DefaultTimeout when 0).
	ReadTimeout time.Duration
	Logger      log.Logger
	// NVML is the process's one client (gpu.Settings.Open says why one),
	// opened and closed by whoever builds the collectors, not by them.
	NVML NVML
	// Engines is where the workloads collector puts the engines it finds,
	// for the engines collector; Build makes one when nil.
	Engines *engine.Directory
	// OwnPorts are the ports the exporter listens at.
	OwnPorts []int
	GPU      gpu.Settings
	Results  *collected.Results // Build makes one when nil
}

// NVML is what the collectors read NVML through; *gpu.Client is one.
type NVML interface {
	Read(ctx context.Context) ([]readings.Reading, error)
	// Recent serves the latest complete reading while at most maxAge old.
	Recent(ctx context.Context, maxAge time.Duration) (readings.Snapshot, error)
	// Stalled is how long the NVML call outstanding has waited; 0 when none.
	Stalled() time.Duration
}

var errNoNVML = errors.New("no NVML client: open one when Selection.NeedsNVML")

type Factory func(env Env) (Collector, error)

// Setup registers a collector's own flags on fg and returns the factory that
// reads them: flags bound in a closure keep collectors free of package state.
type Setup func(fg cliflag.FlagGroup) Factory

const (
	defaultEnabled  = true
	defaultDisabled = false
)

type registration struct {
	name    string
	enabled bool
	setup   Setup
	// onWith is the collector's own flag that turns it on when given.
	onWith string
	nvml   bool // reads Env.NVML
}

var registrations []registration

func registerCollector(name string, enabledByDefault bool, setup Setup) {
	register(registration{name: name, enabled: enabledByDefault, setup: setup})
}

func registerNVMLCollector(name string, enabledByDefault bool, setup Setup) {
	register(registration{name: name, enabled: enabledByDefault, setup: setup, nvml: true})
}

// registerConfiguredCollector registers a collector that does nothing until
// given a file: its flag onWith turns it on; --no-collector.NAME keeps it off.
func registerConfiguredCollector(name, onWith string, setup Setup) {
	register(registration{name: name, setup: setup, onWith: onWith})
}

func register(r registration) {
	for _, other := range registrations {
		if other.name == r.name {
			panic("collector " + r.name + " registered twice")
		}
	}
	registrations = append(registrations, r)
}

// Selection is the parsed --collector.* flags and each collector's factory.
type Selection struct {
	enabled    map[string]*bool
	explicit   map[string]*bool // --[no-]collector.NAME given
	configured map[string]*bool // the collector's onWith flag given
	factories  map[string]Factory
	nvml       map[string]bool // the collector reads NVML
}

// PoolSettings are --pool.*, shared by the pool collector and plan.
type PoolSettings struct{ reserve *uint64 }

func AddPoolFlags(fg cliflag.FlagGroup) *PoolSettings {
	return &PoolSettings{reserve: addPoolReserveFlag(fg)}
}

// Reserve is --pool.reserve; read it once the flags are parsed.
func (p *PoolSettings) Reserve() uint64 { return *p.reserve }

func AddFlags(fg cliflag.FlagGroup) *Selection {
	s := &Selection{enabled: map[string]*bool{}, explicit: map[string]*bool{},
		configured: map[string]*bool{}, factories: map[string]Factory{}, nvml: map[string]bool{}}
	for _, r := range registrations {
		def := "disabled"
		switch {
		case r.enabled:
			def = "enabled"
		case r.onWith != "":
			def = "disabled; on when --" + r.onWith + " is given"
		}
		s.explicit[r.name] = new(bool)
		s.nvml[r.name] = r.nvml
		s.enabled[r.name] = fg.Flag("collector."+r.name,
			fmt.Sprintf("Enable the %s collector (default: %s).", r.name, def)).
			Default(fmt.Sprint(r.enabled)).IsSetByUser(s.explicit[r.name]).Bool()
		if r.setup != nil {
			group := fg
			if r.onWith != "" {
				s.configured[r.name] = new(bool)
				group = watchFlag{fg, r.onWith, s.configured[r.name]}
			}
			s.factories[r.name] = r.setup(group)
		}
	}
	return s
}

// watchFlag notes whether the user gives one named flag.
type watchFlag struct {
	cliflag.FlagGroup
	name  string
	given *bool
}

func (w watchFlag) Flag(name, help string) *kingpin.FlagClause {
	fc := w.FlagGroup.Flag(name, help)
	if name == w.name {
		fc.IsSetByUser(w.given)
	}
	return fc
}

func (s *Selection) Enabled() []string {
	var names []string
	for name, on := range s.enabled {
		configured := s.configured[name] != nil && *s.configured[name]
		if *on || configured && !*s.explicit[name] {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}

// NeedsNVML: the NVML client is opened only for a collector that reads it.
func (s *Selection) NeedsNVML() bool {
	return slices.ContainsFunc(s.Enabled(), func(name string) bool { return s.nvml[name] })
}

// Build instantiates the enabled collectors; one that cannot be built stops
// the exporter at start, while its operator is watching.
func (s *Selection) Build(env Env) (*Exporter, error) {
	if env.Engines == nil {
		env.Engines = engine.NewDirectory()
	}
	if env.Results == nil {
		env.Results = &collected.Results{}
	}
	cs := map[string]Collector{}
	for _, name := range s.Enabled() {
		cenv := env
		cenv.Logger = log.With(env.Logger, "collector", name)
		c, err := s.factories[name](cenv)
		if err != nil {
			for _, built := range cs {
				closeCollector(built)
			}
			return nil, fmt.Errorf("collector %s: %w", name, err)
		}
		cs[name] = c
	}
	e := NewExporter(cs, env.Results, env.Logger)
	e.readTimeout = env.ReadTimeout
	e.procfs = filepath.Clean(env.ProcFS)
	if env.SysFS != "" {
		e.sysfs = filepath.Clean(env.SysFS)
	}
	return e, nil
}

var (
	scrapeDurationDesc = prometheus.NewDesc(
		"spark_scrape_collector_duration_seconds",
		"Time a collector took during the last scrape.",
		[]string{"collector"}, nil)
	scrapeSuccessDesc = prometheus.NewDesc(
		"spark_scrape_collector_success",
		"1 if the collector ran without error during the last scrape.",
		[]string{"collector"}, nil)
)

// health remembers a collector's latest run: whether it failed, so that a
// persistent failure is logged when it starts and when it clears rather than
// on every scrape, and what spark_scrape_collector_* said, for State.
type health struct {
	mu      sync.Mutex
	failing bool
	last    collected.Run
}

// Exporter runs a set of collectors on each scrape; it is a prometheus.Collector.
type Exporter struct {
	collectors map[string]Collector
	health     map[string]*health
	results    *collected.Results
	logger     log.Logger
	// procfs and sysfs are cut out of the errors logged: collectors' errors
	// quote the files they failed on, and a mount point may be a private path.
	procfs, sysfs string
	// readTimeout is Env.ReadTimeout: each run's deadline.
	readTimeout time.Duration
}

// NewExporter wraps built collectors that store in results (new when nil).
func NewExporter(collectors map[string]Collector, results *collected.Results, logger log.Logger) *Exporter {
	h := make(map[string]*health, len(collectors))
	for name := range collectors {
		h[name] = &health{}
	}
	if results == nil {
		results = &collected.Results{}
	}
	return &Exporter{collectors: collectors, health: h, results: results, logger: logger}
}

func (e *Exporter) Names() []string {
	names := make([]string, 0, len(e.collectors))
	for name := range e.collectors {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// Describe sends only the per-collector descriptors: the collectors' own
// metrics depend on the hardware found, so they are unchecked, as in node_exporter.
func (e *Exporter) Describe(ch chan<- *prometheus.Desc) {
	ch <- scrapeDurationDesc
	ch <- scrapeSuccessDesc
	ch <- entriesLeftOutDesc
}

func (e *Exporter) Collect(ch chan<- prometheus.Metric) {
	e.collect(ch, e.Names())
}

func (e *Exporter) collect(ch chan<- prometheus.Metric, names []string) {
	var wg sync.WaitGroup
	for _, name := range names {
		wg.Go(func() { e.run(name, ch) })
	}
	wg.Wait()
	if len(names) == len(e.collectors) {
		e.results.Complete(time.Now())
	}
}

func (e *Exporter) run(name string, ch chan<- prometheus.Metric) {
	duration, err := e.timed(name, func(ctx context.Context) error { return e.collectors[name].Update(ctx, ch) })
	success := 1.0
	if err != nil && !errors.Is(err, errNoData) {
		success = 0
	}
	// State's runs are these two values: the page says what the exposition does.
	ch <- prometheus.MustNewConstMetric(scrapeDurationDesc, prometheus.GaugeValue, duration.Seconds(), name)
	ch <- prometheus.MustNewConstMetric(scrapeSuccessDesc, prometheus.GaugeValue, success, name)
}

// timed runs f, a collector's Update, under the one deadline of a
// collector run's reads, and records how it went.
func (e *Exporter) timed(name string, f func(ctx context.Context) error) (time.Duration, error) {
	start := time.Now()
	ctx, cancel := hostfs.RunContext(context.Background(), e.readTimeout)
	err := f(ctx)
	cancel()
	duration := time.Since(start)
	e.record(name, err, duration)
	return duration, err
}

// record logs a change of a collector's state: the first failure at error
// level, the recovery at info level; repeats only at debug level.
func (e *Exporter) record(name string, err error, duration time.Duration) {
	logger := log.With(e.logger, "collector", name)
	if errors.Is(err, errNoData) {
		level.Debug(logger).Log("msg", "collector returned no data", "duration_seconds", duration.Seconds())
		err = nil
	}
	h := e.health[name]
	h.mu.Lock()
	was := h.failing
	h.failing = err != nil
	h.last = collected.Run{Name: name, Success: err == nil, Duration: duration}
	h.mu.Unlock()
	switch {
	case err != nil && !was:
		level.Error(logger).Log("msg", "collector failed; further failures are logged at debug level until it recovers", "err", e.redact(err))
	case err != nil:
		level.Debug(logger).Log("msg", "collector still failing", "err", e.redact(err))
	case was:
		level.Info(logger).Log("msg", "collector recovered")
	}
}

func (e *Exporter) redact(err error) string {
	return redact.UnderRoots(err.Error(), e.procfs, e.sysfs)
}

// Filter returns a collector that runs only the named collectors (collect[]
// and exclude[]); it shares e's collectors and their state.
func (e *Exporter) Filter(include, exclude []string) (prometheus.Collector, error) {
	for _, name := range slices.Concat(include, exclude) {
		if _, ok := e.collectors[name]; !ok {
			return nil, fmt.Errorf("unknown or disabled collector %q", name)
		}
	}
	var names []string
	for _, name := range e.Names() {
		if (len(include) == 0 || slices.Contains(include, name)) && !slices.Contains(exclude, name) {
			names = append(names, name)
		}
	}
	return filtered{e, names}, nil
}

type filtered struct {
	e     *Exporter
	names []string
}

func (f filtered) Describe(ch chan<- *prometheus.Desc) { f.e.Describe(ch) }
func (f filtered) Collect(ch chan<- prometheus.Metric) { f.e.collect(ch, f.names) }

func (e *Exporter) Close() error {
	var errs []error
	for _, name := range e.Names() {
		if err := closeCollector(e.collectors[name]); err != nil {
			errs = append(errs, fmt.Errorf("collector %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

func closeCollector(c Collector) error {
	if closer, ok := c.(io.Closer); ok {
		return closer.Close()
	}
	return nil
}

// newDesc describes a metric by its full name, so that grepping a metric
// name finds where it is defined.
func newDesc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

func boolToFloat64(ok bool) float64 {
	if ok {
		return 1
	}
	return 0
}
