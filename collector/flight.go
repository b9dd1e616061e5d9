package collector

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spark-exporter/spark_exporter/internal/cliflag"
	"github.com/spark-exporter/spark_exporter/internal/collected"
	"github.com/spark-exporter/spark_exporter/internal/hostfs"
	"github.com/spark-exporter/spark_exporter/internal/recorder"
)

// The flight collector runs the flight recorder (internal/recorder) on the
// collectors' results and reports its counters; it reads nothing itself.
func init() {
	registerConfiguredCollector("flight", "flight.file", func(fg cliflag.FlagGroup) Factory {
		file := fg.Flag("flight.file", "The flight recorder's ring file; the recorder is off without it.").PlaceHolder("FILE").String()
		interval := cliflag.Duration(fg.Flag("flight.interval", "Time between two flight records.").Default("5s"))
		size := cliflag.Bytes(fg.Flag("flight.size", "The flight ring's size on disk (fixed; at 512 bytes a record, 64MiB holds a week at 5s).").Default("64MiB"))
		return func(env Env) (Collector, error) {
			if *file == "" {
				return nil, errors.New("--collector.flight needs --flight.file")
			}
			if *interval < 100*time.Millisecond {
				return nil, errors.New("--flight.interval: at least 100ms")
			}
			proc := hostfs.New(env.ProcFS).WithTimeout(env.ReadTimeout)
			r, err := recorder.Open(*file, *size, *interval, readBootID(proc), env.Results, proc, env.Logger)
			if err != nil {
				return nil, err
			}
			r.Start()
			return &flightCollector{recorder: r, results: env.Results}, nil
		}
	})
}

type flightCollector struct {
	recorder *recorder.Recorder
	results  *collected.Results
}

func (c *flightCollector) Close() error { return c.recorder.Close() }

func (c *flightCollector) Update(ctx context.Context, ch chan<- prometheus.Metric) error {
	account := c.recorder.Account()
	c.results.Set(func(st *collected.State) { st.Flight = account })
	c.recorder.Collect(ch)
	return nil
}
