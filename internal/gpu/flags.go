package gpu

import (
	"context"
	"fmt"
	"time"

	"github.com/go-kit/log"

	"github.com/spark-exporter/spark_exporter/internal/cliflag"
	"github.com/spark-exporter/spark_exporter/internal/gpu/readings"
)

const (
	// DefaultTimeout is --gpu.timeout's default.
	DefaultTimeout = 2 * time.Second
	// DefaultMaxAge is --gpu.max-age's default: the thermal sampler's default
	// interval, so that with both at their defaults NVML is read once per
	// interval whatever the scrape rate.
	DefaultMaxAge = 5 * time.Second
)

// Settings are the parsed --gpu.* flags.
type Settings struct {
	// Library is --gpu.nvml-library: what dlopen is asked for.
	Library string
	// Timeout is --gpu.timeout: the deadline of each NVML read.
	Timeout time.Duration
	// MaxAge is --gpu.max-age: how old a reading a scrape may be served.
	MaxAge time.Duration
}

// Flags are the registered --gpu.* flags; Settings reads them once parsed.
type Flags struct {
	library         *string
	timeout, maxAge *time.Duration
}

// AddFlags registers the --gpu.* flags on fg. They are the process's, not a
// collector's: the gpu and thermal collectors share one client (Settings.Open).
func AddFlags(fg cliflag.FlagGroup) *Flags {
	return &Flags{
		library: fg.Flag("gpu.nvml-library",
			"NVML library to load: a path, or a file name the dynamic loader looks up. Shared with the thermal collector.").
			Default(DefaultLibrary).String(),
		timeout: cliflag.Duration(fg.Flag("gpu.timeout",
			"Deadline of each NVML read; a driver that does not answer in time fails the gpu collector, not the scrape. Shared with the thermal collector.").
			Default(DefaultTimeout.String())),
		maxAge: cliflag.Value(fg.Flag("gpu.max-age",
			"A scrape serves the latest NVML reading, the thermal sampler's or another scrape's, while it is at most this old, "+
				"instead of reading NVML again; 0 reads NVML on every scrape.").
			Default(DefaultMaxAge.String()), parseMaxAge),
	}
}

// Settings returns the parsed flags.
func (f *Flags) Settings() Settings {
	return Settings{Library: *f.library, Timeout: *f.timeout, MaxAge: *f.maxAge}
}

// parseMaxAge reads --gpu.max-age: a duration, 0 included.
func parseMaxAge(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return 0, fmt.Errorf("not a duration; use a unit such as 5s or 1m")
	case d < 0:
		return 0, fmt.Errorf("must not be negative")
	}
	return d, nil
}

// Open starts the process's NVML client. There must be one per process:
// go-nvml binds NVML's functions process-wide to the first library loaded
// (see pin), so a second could not honour another --gpu.nvml-library, and
// NVML's init and shutdown are process-wide counts.
func (s Settings) Open(logger log.Logger) *Client {
	return New(Options{
		Library: s.Library,
		// At least 5s: New waits for the first initialisation.
		InitTimeout: max(5*time.Second, s.Timeout),
		Logger:      logger,
	})
}

// WithTimeout bounds every read of src by timeout (--gpu.timeout) as well as
// the caller's own deadline.
func WithTimeout(src Source, timeout time.Duration) Source {
	return deadline{src, timeout}
}

type deadline struct {
	src     Source
	timeout time.Duration
}

func (d deadline) Read(ctx context.Context) ([]readings.Reading, error) {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	return d.src.Read(ctx)
}
