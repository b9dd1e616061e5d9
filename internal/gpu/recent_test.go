package gpu

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/go-kit/log"

	"github.com/spark-exporter/spark_exporter/internal/gpu/readings"
)

func TestFresh(t *testing.T) {
	taken := time.Date(2025, 11, 24, 14, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		now    time.Time
		maxAge time.Duration
		want   bool
	}{
		{"just taken", taken, 5 * time.Second, true},
		{"younger than the bound", taken.Add(4 * time.Second), 5 * time.Second, true},
		{"at the bound", taken.Add(5 * time.Second), 5 * time.Second, true},
		{"past the bound", taken.Add(5*time.Second + 1), 5 * time.Second, false},
		{"bound 0", taken.Add(1), 0, false},
		{"negative bound: never", taken, -1, false},
		{"from the future (clock stepped back)", taken.Add(-time.Second), 5 * time.Second, false},
	} {
		if got := fresh(taken, tc.now, tc.maxAge); got != tc.want {
			t.Errorf("%s: Fresh = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// clock is a test clock that moves only when told.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func newClockedClient(t *testing.T, lib nvml.Interface) (*Client, *clock) {
	t.Helper()
	clk := &clock{now: time.Date(2025, 11, 24, 14, 0, 0, 0, time.UTC)}
	c := New(Options{NVML: lib, Logger: log.NewNopLogger(), RetryMin: time.Hour, Now: clk.Now})
	t.Cleanup(func() { c.Close() })
	return c, clk
}

func recent(t *testing.T, c *Client, maxAge time.Duration) (readings.Snapshot, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return c.Recent(ctx, maxAge)
}

// What the sampler read (Snapshot) is served to a scrape (Recent) while it
// is young enough, without a call to NVML; past the bound NVML is read
// again, and every field of the device with it.
func TestRecentServesTheLatestReadingWithinMaxAge(t *testing.T) {
	d := gb10(0)
	c, clk := newClockedClient(t, fakeNVML(d))
	taken := clk.Now()
	if _, err := snapshot(t, c); err != nil {
		t.Fatal(err)
	}
	calls := func() int { return len(d.GetPowerUsageCalls()) }
	if calls() != 1 {
		t.Fatalf("%d power reads after one snapshot", calls())
	}

	clk.advance(5 * time.Second)
	snap, err := recent(t, c, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if calls() != 1 || !snap.Time.Equal(taken) || snap.Devices[0].PowerWatts == nil || *snap.Devices[0].PowerWatts != 100.25 {
		t.Errorf("%d power reads, snapshot of %v with %v W; want the sampler's reading served, no read",
			calls(), snap.Time, deref(snap.Devices[0].PowerWatts))
	}
	readsPerSnapshot := len(d.GetTemperatureCalls()) + len(d.GetClockInfoCalls()) + len(d.GetUtilizationRatesCalls()) +
		len(d.GetComputeRunningProcessesCalls())
	if readsPerSnapshot != 4 {
		t.Errorf("%d reads of temperature, clock, utilisation and processes, want 4 (one snapshot's)", readsPerSnapshot)
	}

	clk.advance(time.Nanosecond)
	snap, err = recent(t, c, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if calls() != 2 || !snap.Time.Equal(clk.Now()) {
		t.Errorf("%d power reads, snapshot of %v; want a new read at %v once the reading is older than the bound",
			calls(), snap.Time, clk.Now())
	}
	if _, err := c.Snapshot(context.Background()); err != nil || calls() != 3 {
		t.Errorf("readings.Snapshot: %v, %d power reads; want a read whatever the age", err, calls())
	}
}

// A failed read is never served: the next scrape reads again.
func TestRecentServesNoFailedRead(t *testing.T) {
	d := gb10(0)
	var lost atomic.Bool
	d.GetPowerUsageFunc = func() (uint32, nvml.Return) {
		if lost.Load() {
			return 0, nvml.ERROR_GPU_IS_LOST
		}
		return 99000, nvml.SUCCESS
	}
	c, clk := newClockedClient(t, fakeNVML(d))
	if _, err := snapshot(t, c); err != nil {
		t.Fatal(err)
	}
	lost.Store(true)
	clk.advance(time.Minute)
	if _, err := recent(t, c, 5*time.Second); err == nil {
		t.Fatal("no error from a lost GPU")
	}
	if _, err := recent(t, c, 5*time.Second); err == nil {
		t.Error("the failed read was served from the cache: no error")
	}
	if n := len(d.GetPowerUsageCalls()); n != 3 {
		t.Errorf("%d power reads, want 3: each failed read tried again", n)
	}
}

// The driver going away drops the latest reading: it is not served once
// NVML is back, however young.
func TestRecentForgetsReadingsOfALostDriver(t *testing.T) {
	var gone atomic.Bool
	d, lib := driverThatGoes(&gone)
	c := newTestClient(t, lib, nil)
	if _, err := snapshot(t, c); err != nil {
		t.Fatal(err)
	}
	gone.Store(true)
	if _, err := c.Snapshot(context.Background()); err == nil {
		t.Fatal("no error when the driver went away")
	}
	if _, err := recent(t, c, time.Hour); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Recent while NVML is down: %v, want ErrUnavailable", err)
	}
	gone.Store(false)
	eventually(t, "NVML up again", c.Up)
	before := len(d.GetPowerUsageCalls())
	if _, err := recent(t, c, time.Hour); err != nil {
		t.Fatal(err)
	}
	if len(d.GetPowerUsageCalls()) != before+1 {
		t.Error("a reading from before the driver went away was served")
	}
}

// Scrapes arriving together with the latest reading too old read NVML
// once between them.
func TestRecentReadsOnceForConcurrentCallers(t *testing.T) {
	d := gb10(0)
	c, clk := newClockedClient(t, fakeNVML(d))
	if _, err := snapshot(t, c); err != nil {
		t.Fatal(err)
	}
	clk.advance(time.Minute)
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for range 20 {
		wg.Go(func() {
			_, err := recent(t, c, 5*time.Second)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := len(d.GetPowerUsageCalls()); n != 2 {
		t.Errorf("%d power reads, want 2: the first snapshot and one for the 20 scrapes", n)
	}
}
