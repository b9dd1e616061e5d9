package logging

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/alecthomas/kingpin/v2"
	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
)

func parse(t *testing.T, args ...string) Config {
	t.Helper()
	app := kingpin.New("t", "")
	c := AddFlags(app)
	if _, err := app.Parse(args); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestLevelFiltersBothLoggers(t *testing.T) {
	var buf bytes.Buffer
	logger, slogger := New(&buf, parse(t, "--log.level=warn"))
	level.Info(logger).Log("msg", "hidden-info")
	level.Warn(logger).Log("msg", "shown-warn")
	slogger.Info("hidden-slog-info")
	slogger.Error("shown-slog-error")
	out := buf.String()
	for _, hidden := range []string{"hidden-info", "hidden-slog-info"} {
		if strings.Contains(out, hidden) {
			t.Errorf("%q logged at level warn:\n%s", hidden, out)
		}
	}
	for _, shown := range []string{"level=warn msg=shown-warn", "level=error", "shown-slog-error"} {
		if !strings.Contains(out, shown) {
			t.Errorf("%q missing:\n%s", shown, out)
		}
	}
}

func TestJSONFormat(t *testing.T) {
	var buf bytes.Buffer
	logger, slogger := New(&buf, parse(t, "--log.format=json"))
	level.Info(logger).Log("msg", "one")
	slogger.Info("two")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 lines, got %q", lines)
	}
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not JSON: %q: %v", l, err)
		}
		if m["time"] == nil || m["level"] != "info" {
			t.Errorf("line lacks time or level=info: %q", l)
		}
	}
}

func TestUnknownLevelRefused(t *testing.T) {
	app := kingpin.New("t", "")
	AddFlags(app)
	if _, err := app.Parse([]string{"--log.level=loud"}); err == nil {
		t.Fatal("--log.level=loud accepted")
	}
}

// Every line starts time, caller, level, msg, in that order, whether the
// exporter logged it (with context such as component=…) or a library
// through the slog bridge.
func TestOneKeyOrder(t *testing.T) {
	var buf bytes.Buffer
	logger, slogger := New(&buf, parse(t))
	level.Info(logger).Log("msg", "plain", "collector", "gpu")
	level.Warn(log.With(logger, "component", "nvml")).Log("msg", "with context", "err", "x")
	slogger.Info("from slog", "address", "127.0.0.1:1")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("want 3 lines, got %q", lines)
	}
	order := regexp.MustCompile(`^time=\S+ caller=\S+ level=(info|warn) msg=`)
	for _, l := range lines {
		if !order.MatchString(l) {
			t.Errorf("line not in the order time, caller, level, msg: %s", l)
		}
	}
	if !strings.HasSuffix(lines[1], "component=nvml err=x") || !strings.HasSuffix(lines[2], "address=127.0.0.1:1") {
		t.Errorf("the other keys lost or reordered:\n%s", buf.String())
	}
}
