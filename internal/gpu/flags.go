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
	defaultTimeout = 2 * time.Second
	// DefaultMaxAge is the thermal sampler's default interval, so that NVML
	// is read once per interval whatever the scrape rate.
	DefaultMaxAge = 5 * time.Second
)

// Settings are the parsed --gpu.* flags.
type Settings struct {
	Library string
	Timeout time.Duration
	MaxAge  time.Duration
}

// Flags are the registered --gpu.* flags.
type Flags struct {
	library         *string
	timeout, maxAge *time.Duration
}

// AddFlags registers the --gpu.* flags: the process's, shared by the gpu and
// thermal collectors' one client.
func AddFlags(fg cliflag.FlagGroup) *Flags {
	return &Flags{
		library: fg.Flag("gpu.nvml-library",
			"NVML library to load: a path, or a file name the dynamic loader looks up. Shared with the thermal collector.").
			Default(defaultLibrary).String(),
		timeout: cliflag.Duration(fg.Flag("gpu.timeout",
			"Deadline of each NVML read; a driver that does not answer in time fails the gpu collector, not the scrape. Shared with the thermal collector.").
			Default(defaultTimeout.String())),
		maxAge: cliflag.Value(fg.Flag("gpu.max-age",
			"A scrape serves the latest NVML reading, the thermal sampler's or another scrape's, while it is at most this old, "+
				"instead of reading NVML again; 0 reads NVML on every scrape.").
			Default(DefaultMaxAge.String()), parseMaxAge),
	}
}

func (f *Flags) Settings() Settings {
	return Settings{Library: *f.library, Timeout: *f.timeout, MaxAge: *f.maxAge}
}

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

// Open starts the process's one NVML client: go-nvml binds to the first
// library loaded (see pin), and NVML's init and shutdown are process-wide counts.
func (s Settings) Open(logger log.Logger) *Client {
	return New(Options{
		Library:     s.Library,
		InitTimeout: max(5*time.Second, s.Timeout),
		Logger:      logger,
	})
}

// WithTimeout bounds every read of src by timeout as well as the caller's deadline.
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
