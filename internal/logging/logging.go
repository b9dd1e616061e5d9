// Package logging builds the go-kit logger and, bridged onto it so that
// both write one stream in one format, the *slog.Logger exporter-toolkit asks for.
package logging

import (
	"io"
	"log/slog"

	"github.com/go-kit/log"
	"github.com/go-kit/log/level"
	sloggokit "github.com/tjhop/slog-gokit"

	"github.com/spark-exporter/spark_exporter/internal/cliflag"
)

type Config struct {
	Level  *string
	Format *string
}

func AddFlags(fg cliflag.FlagGroup) Config {
	return Config{
		Level: cliflag.Enum(fg.Flag("log.level", "Only log messages with the given severity or above. One of: [debug, info, warn, error]").
			Default("info"), "debug", "info", "warn", "error"),
		Format: cliflag.Enum(fg.Flag("log.format", "Output format of log messages. One of: [logfmt, json]").
			Default("logfmt"), "logfmt", "json"),
	}
}

func New(w io.Writer, c Config) (log.Logger, *slog.Logger) {
	sw := log.NewSyncWriter(w)
	var base log.Logger
	if *c.Format == "json" {
		base = log.NewJSONLogger(sw)
	} else {
		base = log.NewLogfmtLogger(sw)
	}

	base = ordered(base)

	var allow level.Option
	var slogLevel slog.Level
	switch *c.Level {
	case "debug":
		allow, slogLevel = level.AllowDebug(), slog.LevelDebug
	case "warn":
		allow, slogLevel = level.AllowWarn(), slog.LevelWarn
	case "error":
		allow, slogLevel = level.AllowError(), slog.LevelError
	default:
		allow, slogLevel = level.AllowInfo(), slog.LevelInfo
	}

	// The bridge adds its own time and caller keys: it wraps the base logger.
	bridged := slog.New(sloggokit.NewGoKitHandler(level.NewFilter(base, allow), slogLevel))
	// Depth 5 skips go-kit's level and filter wrappers.
	logger := log.With(base, slog.TimeKey, log.DefaultTimestampUTC, "caller", log.Caller(5))
	return level.NewFilter(logger, allow), bridged
}

// leadingKeys start every line whoever logged it: the bridge writes level,
// caller, time; go-kit puts level after the logger's keys.
var leadingKeys = []string{slog.TimeKey, "caller", "level", "msg"}

func ordered(next log.Logger) log.Logger {
	return log.LoggerFunc(func(keyvals ...any) error {
		out := make([]any, 0, len(keyvals)+1)
		for _, k := range leadingKeys {
			for i := 0; i+1 < len(keyvals); i += 2 {
				if keyvals[i] == k {
					out = append(out, keyvals[i], keyvals[i+1])
				}
			}
		}
		for i := 0; i < len(keyvals); i += 2 {
			if i+1 < len(keyvals) && isLeading(keyvals[i]) {
				continue
			}
			out = append(out, keyvals[i:min(i+2, len(keyvals))]...)
		}
		return next.Log(out...)
	})
}

func isLeading(k any) bool {
	for _, l := range leadingKeys {
		if k == l {
			return true
		}
	}
	return false
}
