package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/prometheus/exporter-toolkit/web"
	"go.yaml.in/yaml/v3"

	"github.com/spark-exporter/spark_exporter/internal/hostfs"
)

// checkWebConfig validates --web.config.file at start, as exporter-toolkit
// would on the first request, so that a bad file (unreadable, not YAML, a
// password that is not a bcrypt hash, a certificate that does not load)
// stops the exporter while its operator is watching. The error names the
// flag and the problem, never the file's path nor those of the files it
// points at.
func checkWebConfig(path string) error {
	if path == "" {
		return nil
	}
	if err := web.Validate(path); err != nil {
		return fmt.Errorf("invalid --web.config.file: %s", redactWebConfigPaths(hostfs.WithoutPath(err).Error(), path))
	}
	return nil
}

// redactWebConfigPaths replaces in msg the web config's path and the
// certificate, key and CA paths it names, which exporter-toolkit's errors
// quote, by the name of the setting.
func redactWebConfigPaths(msg, path string) string {
	var c struct {
		TLS struct {
			Cert string `yaml:"cert_file"`
			Key  string `yaml:"key_file"`
			CA   string `yaml:"client_ca_file"`
		} `yaml:"tls_server_config"`
	}
	if data, err := os.ReadFile(path); err == nil {
		_ = yaml.Unmarshal(data, &c) // a file that does not parse names no other file
	}
	redactions := []hostfs.Renaming{{Path: path, Name: "the file"}}
	for _, f := range []struct{ value, setting string }{
		{c.TLS.Cert, "cert_file"}, {c.TLS.Key, "key_file"}, {c.TLS.CA, "client_ca_file"},
	} {
		if f.value == "" {
			continue
		}
		redactions = append(redactions, hostfs.Renaming{Path: f.value, Name: f.setting})
		if !filepath.IsAbs(f.value) {
			// exporter-toolkit reads a relative path from the config's directory.
			redactions = append(redactions, hostfs.Renaming{Path: filepath.Join(filepath.Dir(path), f.value), Name: f.setting})
		}
	}
	return hostfs.ReplacePaths(msg, redactions)
}

// redactingHandler passes exporter-toolkit's log records on with the web
// config's paths redacted. The toolkit reads --web.config.file again on
// every request, and logs the error, path included, when it cannot.
type redactingHandler struct {
	slog.Handler
	configPath string
}

// withWebConfigRedacted wraps logger's handler, when there is a web config.
func withWebConfigRedacted(logger *slog.Logger, configPath string) *slog.Logger {
	if configPath == "" {
		return logger
	}
	return slog.New(redactingHandler{logger.Handler(), configPath})
}

func (h redactingHandler) Handle(ctx context.Context, r slog.Record) error {
	out := slog.NewRecord(r.Time, r.Level, h.redact(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.Handler.Handle(ctx, out)
}

func (h redactingHandler) attr(a slog.Attr) slog.Attr {
	switch v := a.Value.Resolve(); v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.redact(v.String()))
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			return slog.String(a.Key, h.redact(err.Error()))
		}
	case slog.KindGroup:
		attrs := v.Group()
		redacted := make([]any, len(attrs))
		for i, g := range attrs {
			redacted[i] = h.attr(g)
		}
		return slog.Group(a.Key, redacted...)
	}
	return a
}

func (h redactingHandler) redact(s string) string { return redactWebConfigPaths(s, h.configPath) }

func (h redactingHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	redacted := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		redacted[i] = h.attr(a)
	}
	return redactingHandler{h.Handler.WithAttrs(redacted), h.configPath}
}

func (h redactingHandler) WithGroup(name string) slog.Handler {
	return redactingHandler{h.Handler.WithGroup(name), h.configPath}
}
