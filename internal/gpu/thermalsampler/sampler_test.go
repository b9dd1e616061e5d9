package thermalsampler

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-kit/log"

	"github.com/spark-exporter/spark_exporter/internal/gpu/readings"
	"github.com/spark-exporter/spark_exporter/internal/judge"
)

// source serves what set gave it last.
type source struct {
	mu       sync.Mutex
	readings []readings.Reading
	err      error
}

func (s *source) Read(context.Context) ([]readings.Reading, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.readings, s.err
}

func (s *source) set(readings []readings.Reading, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.readings, s.err = readings, err
}

func reading(idx int, temp, power, util float64) readings.Reading {
	return readings.Reading{Index: idx, TemperatureCelsius: ptr(temp), PowerWatts: ptr(power), Utilization: ptr(util)}
}

func at(i int) time.Time { return t0.Add(time.Duration(i) * 10 * time.Second) }

// The sampler stepped by hand: the snapshot says, per GPU by index, the
// verdict, the episodes, the throttled time and the window's samples, and a
// snapshot once taken does not change with later samples.
func TestSamplerSnapshot(t *testing.T) {
	src := &source{}
	logs := &bytes.Buffer{}
	s := NewSampler(src, smallConfig(), "", log.NewLogfmtLogger(logs))
	if snap := s.Snapshot(); snap.Samples != 0 || len(snap.GPUs) != 0 || snap.CSV {
		t.Fatalf("before any sample: %+v", snap)
	}
	src.set([]readings.Reading{reading(1, 40, 5, 0), reading(0, 90, 100, 0.97)}, nil)
	for i := range 10 {
		s.Sample(context.Background(), at(i))
	}
	snap := s.Snapshot()
	if snap.Samples != 10 || len(snap.GPUs) != 2 || snap.GPUs[0].Index != 0 || snap.GPUs[1].Index != 1 {
		t.Fatalf("after ten samples of GPUs 1 and 0: %+v", snap)
	}
	hot := snap.GPUs[0]
	if hot.Verdict.State != judge.Throttled || hot.Episodes != 1 || hot.Throttled != 30*time.Second {
		t.Errorf("GPU 0: %s, %d episodes, %v throttled; want throttled since the sample at 60 s, one episode, 30 s",
			hot.Verdict.State, hot.Episodes, hot.Throttled)
	}
	if len(hot.Window) != 10 || !hot.Window[0].Time.Equal(at(0)) || !hot.Window[9].Time.Equal(at(9)) || hot.Window[9].Power != 100 {
		t.Errorf("GPU 0's window: %d samples, %v to %v", len(hot.Window), hot.Window[0].Time, hot.Window[len(hot.Window)-1].Time)
	}
	if idle := snap.GPUs[1]; idle.Verdict.State != judge.Normal || idle.Episodes != 0 {
		t.Errorf("GPU 1: %s, %d episodes; want normal, none", idle.Verdict.State, idle.Episodes)
	}

	src.set([]readings.Reading{reading(0, 88, 5, 0)}, nil)
	s.Sample(context.Background(), at(10))
	if later := s.Snapshot(); later.GPUs[0].Verdict.State == judge.Throttled || later.GPUs[0].Throttled != 40*time.Second ||
		len(later.GPUs[0].Window) != 11 {
		t.Errorf("after power dropped: %+v", later.GPUs[0])
	}
	if hot.Verdict.State != judge.Throttled || len(hot.Window) != 10 || snap.Samples != 10 {
		t.Error("a snapshot taken earlier changed with a later sample")
	}
	if lines := strings.Split(strings.TrimSpace(logs.String()), "\n"); len(lines) != 2 ||
		!strings.Contains(lines[0], "GPU thermal throttling: expect slower steps") || !strings.Contains(lines[1], "GPU thermal throttling ended") {
		t.Errorf("want one line entering, one leaving; got:\n%s", logs)
	}
}

// A failed read is a sample without readings: counted, the windows ageing.
func TestSamplerFailedRead(t *testing.T) {
	src := &source{}
	src.set([]readings.Reading{reading(0, 40, 4, 0)}, nil)
	s := NewSampler(src, smallConfig(), "", log.NewNopLogger())
	s.Sample(context.Background(), at(0))
	src.set(nil, errors.New("NVML wedged"))
	for i := 1; i < 6; i++ {
		s.Sample(context.Background(), at(i))
	}
	snap := s.Snapshot()
	if snap.Samples != 6 || len(snap.GPUs) != 1 || snap.GPUs[0].Verdict.State != judge.Collecting || len(snap.GPUs[0].Window) != 1 {
		t.Errorf("after five failed reads: %+v", snap)
	}
}

// Run samples at once and stops when its context ends, interrupting a
// wedged read; after Close, no sample is taken, and the CSV log is closed.
func TestSamplerRunAndClose(t *testing.T) {
	reads := make(chan struct{}, 1)
	wedged := sourceFunc(func(ctx context.Context) ([]readings.Reading, error) {
		reads <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	})
	cfg := smallConfig()
	cfg.Interval, cfg.Window = time.Hour, 3*time.Hour // only the first, immediate sample
	path := filepath.Join(t.TempDir(), "thermal.log")
	s := NewSampler(wedged, cfg, path, log.NewNopLogger())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	select {
	case <-reads:
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not read within 30s of starting")
	}
	cancel()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return within 30s of its context ending, a read wedged")
	}
	if n := s.Snapshot().Samples; n != 1 {
		t.Errorf("%d samples, want the one interrupted", n)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ok := sourceFunc(func(context.Context) ([]readings.Reading, error) {
		return []readings.Reading{reading(0, 40, 4, 0)}, nil
	})
	s.src = ok
	s.Sample(context.Background(), at(1))
	if n := s.Snapshot().Samples; n != 1 {
		t.Errorf("a sample was taken after Close (%d samples)", n)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the CSV log was written after Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

type sourceFunc func(context.Context) ([]readings.Reading, error)

func (f sourceFunc) Read(ctx context.Context) ([]readings.Reading, error) { return f(ctx) }

// A small window keeps the tests short: one minute of 10 s samples.
func smallConfig() judge.ThermalConfig {
	cfg := judge.DefaultThermalConfig()
	cfg.Window = time.Minute
	cfg.Interval = 10 * time.Second
	return cfg
}

var t0 = time.Date(2025, 11, 24, 14, 0, 0, 0, time.UTC)

func ptr[T any](v T) *T { return &v }
