package gpu

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kingpin/v2"

	"github.com/spark-exporter/spark_exporter/internal/gpu/readings"
)

// The --gpu.* flags parse into the settings, with their defaults when not
// given, and a bad value is refused naming its flag.
func TestFlags(t *testing.T) {
	app := kingpin.New("t", "")
	flags := AddFlags(app)
	if _, err := app.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if got, want := flags.Settings(), (Settings{Library: defaultLibrary, Timeout: 2 * time.Second, MaxAge: 5 * time.Second}); got != want {
		t.Errorf("defaults %+v, want %+v", got, want)
	}

	app = kingpin.New("t", "")
	flags = AddFlags(app)
	if _, err := app.Parse([]string{"--gpu.nvml-library=/opt/nvidia/libnvidia-ml.so.1", "--gpu.timeout=750ms", "--gpu.max-age=0"}); err != nil {
		t.Fatal(err)
	}
	if got, want := flags.Settings(), (Settings{Library: "/opt/nvidia/libnvidia-ml.so.1", Timeout: 750 * time.Millisecond}); got != want {
		t.Errorf("settings %+v, want %+v", got, want)
	}

	for _, tc := range []struct{ arg, want string }{
		{"--gpu.timeout=soon", "--gpu.timeout"},
		{"--gpu.timeout=0", "--gpu.timeout"},
		{"--gpu.max-age=-5s", "--gpu.max-age"},
	} {
		app := kingpin.New("t", "")
		AddFlags(app)
		if _, err := app.Parse([]string{tc.arg}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v does not name %s", tc.arg, err, tc.want)
		}
	}
}

func TestParseMaxAge(t *testing.T) {
	for in, want := range map[string]time.Duration{"5s": 5 * time.Second, "0": 0, "0s": 0, "1m": time.Minute} {
		if got, err := parseMaxAge(in); err != nil || got != want {
			t.Errorf("%q: %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"-1s", "soon", ""} {
		if _, err := parseMaxAge(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}

// deadlineOf notes the time left to each read's deadline.
type deadlineOf struct{ left []time.Duration }

func (d *deadlineOf) Read(ctx context.Context) ([]readings.Reading, error) {
	dl, ok := ctx.Deadline()
	if !ok {
		d.left = append(d.left, -1)
		return nil, nil
	}
	d.left = append(d.left, time.Until(dl))
	return nil, nil
}

// WithTimeout bounds every read by the timeout, and keeps a caller's
// shorter deadline.
func TestWithTimeout(t *testing.T) {
	src := &deadlineOf{}
	bounded := WithTimeout(src, time.Minute)
	bounded.Read(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	bounded.Read(ctx)
	if len(src.left) != 2 || src.left[0] <= 0 || src.left[0] > time.Minute || src.left[1] <= 0 || src.left[1] > time.Second {
		t.Errorf("time left to the reads' deadlines: %v; want at most a minute, then at most the caller's second", src.left)
	}
}

// A client opened without a library it can load is up to nothing, and
// says so rather than failing: the exporter starts without a GPU.
func TestOpenWithoutALibrary(t *testing.T) {
	c := Settings{Library: "/nonexistent/libnvidia-ml.so.1", Timeout: 50 * time.Millisecond}.Open(nil)
	defer c.Close()
	if _, err := c.Read(context.Background()); err != ErrUnavailable {
		t.Errorf("read without a library: %v, want ErrUnavailable", err)
	}
}
