package gpu

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/dl"
	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	"github.com/jpillora/backoff"

	"github.com/spark-exporter/spark_exporter/internal/gpu/readings"
)

const defaultLibrary = "libnvidia-ml.so.1"

var (
	// ErrUnavailable is normal on a host without an NVIDIA GPU.
	ErrUnavailable = errors.New("NVML is not initialised")
	ErrTimeout     = errors.New("NVML did not answer within the deadline")
)

// Options configures a Client.
type Options struct {
	Library string
	// InitTimeout bounds New's wait for the first initialisation, so that
	// the first scrape sees the GPU, and Close's shutdown; default 5s.
	InitTimeout        time.Duration
	RetryMin, RetryMax time.Duration // between initialisation attempts; default 1s, 30s
	Logger             log.Logger
	NVML               nvml.Interface // replaces the dlopen'd library; tests pass go-nvml's mock
	Now                func() time.Time
}

// Client is the process's connection to NVML. Initialisation is retried in
// the background, and again when a read finds the driver gone, so that a
// driver install or reload needs no restart.
type Client struct {
	opts   Options
	lib    nvml.Interface
	real   bool // lib is the dlopen'd library, not a test double
	w      *worker
	logger log.Logger

	up       atomic.Bool
	lost     chan struct{} // a read found the driver gone
	ctx      context.Context
	cancel   context.CancelFunc
	loopDone chan struct{}

	closeOnce sync.Once
	closeErr  error

	lastMu sync.Mutex
	last   *readings.Snapshot // nil once NVML was lost

	// Touched only by jobs on the worker.
	initialised bool
	pinned      bool
	has         map[string]bool
	driver      string
	cuda        string
	devices     []device
}

// New waits up to opts.InitTimeout for the first initialisation; whatever
// its outcome, the client keeps trying in the background until Close.
func New(opts Options) *Client {
	if opts.Library == "" {
		opts.Library = defaultLibrary
	}
	if opts.InitTimeout <= 0 {
		opts.InitTimeout = 5 * time.Second
	}
	if opts.RetryMin <= 0 {
		opts.RetryMin = time.Second
	}
	if opts.RetryMax < opts.RetryMin {
		opts.RetryMax = max(30*time.Second, opts.RetryMin)
	}
	if opts.Logger == nil {
		opts.Logger = log.NewNopLogger()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	c := &Client{
		opts:     opts,
		lib:      opts.NVML,
		w:        newWorker(opts.Now),
		logger:   opts.Logger,
		lost:     make(chan struct{}, 1),
		loopDone: make(chan struct{}),
	}
	if c.lib == nil {
		c.lib = nvml.New(nvml.WithLibraryPath(opts.Library))
		c.real = true
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())

	ctx, cancel := context.WithTimeout(c.ctx, opts.InitTimeout)
	first := c.initialise(ctx)
	cancel()
	go c.loop(first)
	return c
}

func (c *Client) Up() bool { return c.up.Load() }

// Stalled is how long the NVML call now outstanding has run; it answers
// while a call is wedged in the driver.
func (c *Client) Stalled() time.Duration { return c.w.stalled() }

// Snapshot reads every device; on partial failure the readings taken come
// with the error. The snapshot is shared: callers must not modify it.
func (c *Client) Snapshot(ctx context.Context) (readings.Snapshot, error) {
	return c.Recent(ctx, -1)
}

// Recent serves the latest complete snapshot, whoever read it, while it is
// at most maxAge old; a negative maxAge always reads. Each job looks again
// on the worker, so concurrent callers read NVML once between them.
func (c *Client) Recent(ctx context.Context, maxAge time.Duration) (readings.Snapshot, error) {
	if !c.up.Load() {
		return readings.Snapshot{}, ErrUnavailable
	}
	if snap, ok := c.recent(maxAge); ok {
		return snap, nil
	}
	var snap readings.Snapshot
	var err error
	job := func() {
		if cached, ok := c.recent(maxAge); ok {
			snap = cached
			return
		}
		snap, err = c.readAll()
		c.lastMu.Lock()
		defer c.lastMu.Unlock()
		switch {
		case err == nil:
			c.last = &snap
		case !c.initialised:
			c.last = nil
		}
	}
	if werr := c.w.do(ctx, job); werr != nil {
		if errors.Is(werr, context.DeadlineExceeded) {
			return readings.Snapshot{}, ErrTimeout
		}
		return readings.Snapshot{}, werr
	}
	return snap, err
}

func (c *Client) recent(maxAge time.Duration) (readings.Snapshot, bool) {
	c.lastMu.Lock()
	defer c.lastMu.Unlock()
	if c.last == nil || !fresh(c.last.Time, c.opts.Now(), maxAge) {
		return readings.Snapshot{}, false
	}
	return *c.last, true
}

// fresh: a reading from the future (the clock stepped back) is not.
func fresh(taken, now time.Time, maxAge time.Duration) bool {
	age := now.Sub(taken)
	return age >= 0 && age <= maxAge
}

func (c *Client) Read(ctx context.Context) ([]readings.Reading, error) {
	snap, err := c.Snapshot(ctx)
	return snap.Devices, err
}

// Close shuts NVML down, abandoning a call wedged in the driver after InitTimeout.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.cancel()
		<-c.loopDone
		ctx, cancel := context.WithTimeout(context.Background(), c.opts.InitTimeout)
		defer cancel()
		ret := nvml.SUCCESS
		werr := c.w.do(ctx, func() {
			if c.initialised {
				ret = c.lib.Shutdown()
				c.initialised = false
			}
		})
		c.w.close()
		c.up.Store(false)
		switch {
		case werr != nil:
			c.closeErr = fmt.Errorf("NVML shutdown: %w", werr)
		case ret != nvml.SUCCESS:
			c.closeErr = nvmlError("nvmlShutdown", ret)
		}
	})
	return c.closeErr
}

func (c *Client) loop(first error) {
	defer close(c.loopDone)
	retry := &backoff.Backoff{Min: c.opts.RetryMin, Max: c.opts.RetryMax, Factor: 2}
	err, failures := first, 0
	for {
		if err == nil {
			retry.Reset()
			failures = 0
			select {
			case <-c.lost:
				level.Warn(c.logger).Log("msg", "NVML went away; initialising it again")
			case <-c.ctx.Done():
				return
			}
		} else {
			if failures == 0 {
				level.Info(c.logger).Log("msg", "NVML unavailable: no GPU metrics until it initialises; retrying in the background", "err", err)
			} else {
				level.Debug(c.logger).Log("msg", "NVML still unavailable", "err", err)
			}
			failures++
			select {
			case <-time.After(retry.Duration()):
			case <-c.ctx.Done():
				return
			}
		}
		err = c.initialise(c.ctx)
	}
}

func (c *Client) initialise(ctx context.Context) error {
	var err error
	if werr := c.w.do(ctx, func() { err = c.initJob() }); werr != nil {
		if errors.Is(werr, context.DeadlineExceeded) {
			return fmt.Errorf("initialising: %w", ErrTimeout)
		}
		return werr
	}
	return err
}

func (c *Client) initJob() error {
	if c.initialised { // an attempt whose caller stopped waiting finished after all
		return nil
	}
	if c.real && !c.pinned {
		c.pinned = pin(c.opts.Library)
	}
	if ret := c.lib.Init(); ret != nvml.SUCCESS {
		return nvmlError("nvmlInit", ret)
	}
	driver, cuda, devices, err := c.enumerate()
	if err != nil {
		c.lib.Shutdown()
		return err
	}
	c.driver, c.cuda, c.devices = driver, cuda, devices
	c.initialised = true
	c.up.Store(true)
	level.Info(c.logger).Log("msg", "NVML initialised", "driver_version", driver, "cuda_driver_version", cuda, "devices", len(devices))
	return nil
}

func (c *Client) enumerate() (driver, cuda string, devices []device, err error) {
	c.has = map[string]bool{}
	ext := c.lib.Extensions()
	for _, sym := range optionalSymbols {
		c.has[sym] = ext.LookupSymbol(sym) == nil
	}
	driver, ret := c.lib.SystemGetDriverVersion()
	if ret != nvml.SUCCESS && ret != nvml.ERROR_NOT_SUPPORTED {
		return "", "", nil, nvmlError("nvmlSystemGetDriverVersion", ret)
	}
	driver = validUTF8(driver)
	var v int
	if c.has[symCUDAVersionV2] {
		v, ret = c.lib.SystemGetCudaDriverVersion_v2()
	} else {
		v, ret = c.lib.SystemGetCudaDriverVersion()
	}
	switch ret {
	case nvml.SUCCESS:
		cuda = cudaVersion(v)
	case nvml.ERROR_NOT_SUPPORTED:
	default:
		return "", "", nil, nvmlError("nvmlSystemGetCudaDriverVersion", ret)
	}
	n, ret := c.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return "", "", nil, nvmlError("nvmlDeviceGetCount", ret)
	}
	for i := range n {
		devices = append(devices, describe(c.lib, i))
	}
	return driver, cuda, devices, nil
}

func (c *Client) readAll() (readings.Snapshot, error) {
	if !c.initialised {
		return readings.Snapshot{}, ErrUnavailable
	}
	snap := readings.Snapshot{Time: c.opts.Now(), DriverVersion: c.driver, CUDADriverVersion: c.cuda}
	var errs []error
	for i := range c.devices {
		d := &c.devices[i]
		if d.err != nil {
			*d = describe(c.lib, d.index)
			if d.err != nil {
				errs = append(errs, fmt.Errorf("gpu %d: %w", d.index, d.err))
				continue
			}
		}
		r, err := read(d, c.has, snap.Time)
		if err != nil {
			errs = append(errs, fmt.Errorf("gpu %d: %w", d.index, err))
		}
		snap.Devices = append(snap.Devices, r)
	}
	err := errors.Join(errs...)
	if driverGone(err) {
		c.lib.Shutdown()
		c.initialised = false
		c.up.Store(false)
		select {
		case c.lost <- struct{}{}:
		default:
		}
		return readings.Snapshot{}, err
	}
	return snap, err
}

// pin keeps the library loaded: go-nvml binds its C calls process-wide on
// first call, so a later client would call through dangling bindings if
// nvml.Shutdown's dlclose unloaded it.
func pin(library string) bool {
	return dl.New(library, dl.RTLD_LAZY|dl.RTLD_GLOBAL|dl.RTLD_NODELETE).Open() == nil
}
