package collector

import (
	"context"
	"sync"
	"time"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"

	"github.com/spark-exporter/spark_exporter/internal/gpu"
)

// The gpu and thermal collectors share one NVML client per process: one
// worker goroutine, one initialisation loop, one library. It has to be one
// per process anyway: go-nvml binds NVML's functions process-wide to the
// first library loaded, so two --gpu.nvml-library values could not both be
// honoured. For the same reason its flags, registered by the gpu collector
// (whose Setup the registry always calls, enabled or not), are process-wide
// too: the most recently registered ones apply.
var sharedNVML struct {
	mu      sync.Mutex
	library *string
	timeout *time.Duration
	client  *gpu.Client
	users   int
}

const defaultGPUTimeout = 2 * time.Second

// setNVMLFlags binds the shared client to the parsed --gpu.* flags.
func setNVMLFlags(library *string, timeout *time.Duration) {
	sharedNVML.mu.Lock()
	defer sharedNVML.mu.Unlock()
	sharedNVML.library, sharedNVML.timeout = library, timeout
}

// nvmlSettings reads the flags, or their defaults when none were
// registered.
func nvmlSettings() (library string, timeout time.Duration) {
	library, timeout = gpu.DefaultLibrary, defaultGPUTimeout
	if sharedNVML.library != nil && *sharedNVML.library != "" {
		library = *sharedNVML.library
	}
	if sharedNVML.timeout != nil && *sharedNVML.timeout > 0 {
		timeout = *sharedNVML.timeout
	}
	return library, timeout
}

// acquireNVMLClient returns the shared client, starting it for the first
// user, and the function that gives it back; the last user's release closes
// it. The client's log lines carry the first user's collector label.
func acquireNVMLClient(logger log.Logger) (*gpu.Client, time.Duration, func()) {
	sharedNVML.mu.Lock()
	defer sharedNVML.mu.Unlock()
	library, timeout := nvmlSettings()
	if sharedNVML.client == nil {
		sharedNVML.client = gpu.New(gpu.Options{
			Library: library,
			// The first initialisation is waited for at start, so that
			// the first scrape already sees the GPU.
			InitTimeout: max(5*time.Second, timeout),
			Logger:      logger,
		})
	}
	sharedNVML.users++
	client := sharedNVML.client
	var once sync.Once
	release := func() {
		once.Do(func() {
			sharedNVML.mu.Lock()
			defer sharedNVML.mu.Unlock()
			sharedNVML.users--
			if sharedNVML.users > 0 {
				return
			}
			sharedNVML.client = nil
			if err := client.Close(); err != nil {
				level.Warn(logger).Log("msg", "closing NVML", "err", err)
			}
		})
	}
	return client, timeout, release
}

// acquireNVML gives a collector the shared NVML client as a gpu.Source
// whose reads are bounded by --gpu.timeout, and the function to call when
// the collector closes.
func acquireNVML(env Env) (src gpu.Source, release func(), err error) {
	client, timeout, release := acquireNVMLClient(env.Logger)
	return deadlineSource{client, timeout}, release, nil
}

// deadlineSource applies --gpu.timeout to every read, on top of the
// caller's own deadline.
type deadlineSource struct {
	src     gpu.Source
	timeout time.Duration
}

func (d deadlineSource) Read(ctx context.Context) ([]gpu.Reading, error) {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	return d.src.Read(ctx)
}
