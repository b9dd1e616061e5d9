package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"

	"github.com/prometheus/exporter-toolkit/web"
	"go.yaml.in/yaml/v3"
	"golang.org/x/crypto/bcrypt"

	"github.com/spark-exporter/spark_exporter/internal/redact"
)

// checkWebConfig validates at start, so that a bad file stops the exporter while
// its operator is watching. The error never names the paths.
func checkWebConfig(path string) error {
	if path == "" {
		return nil
	}
	if err := checkWebConfigLimits(path); err != nil {
		return fmt.Errorf("invalid --web.config.file: %w", err)
	}
	if err := web.Validate(path); err != nil {
		return fmt.Errorf("invalid --web.config.file: %s", redactWebConfigPaths(redact.WithoutPath(err).Error(), path))
	}
	return nil
}

// maxTLSFileSize: a CA bundle is about 220 KB; exporter-toolkit reads each file
// whole at every connection, so /dev/zero would take all memory.
const maxTLSFileSize = 1 << 20

// maxBcryptCost: cost 14 takes about a second on one core, and exporter-toolkit
// checks one password at a time, stalling every request behind it.
const maxBcryptCost = 14

// checkWebConfigLimits refuses what exporter-toolkit's Validate accepts but cannot serve.
func checkWebConfigLimits(path string) error {
	var c struct {
		TLS struct {
			Cert string `yaml:"cert_file"`
			Key  string `yaml:"key_file"`
			CA   string `yaml:"client_ca_file"`
		} `yaml:"tls_server_config"`
		Users map[string]string `yaml:"basic_auth_users"`
	}
	if err := checkRegularFile(path, maxTLSFileSize); err != nil {
		return errors.New("the file: " + err.Error())
	}
	data, err := os.ReadFile(path)
	if err != nil || yaml.Unmarshal(data, &c) != nil {
		return nil // Validate says why
	}
	for _, f := range []struct{ value, setting string }{
		{c.TLS.Cert, "cert_file"}, {c.TLS.Key, "key_file"}, {c.TLS.CA, "client_ca_file"},
	} {
		if f.value == "" {
			continue
		}
		file := f.value
		if !filepath.IsAbs(file) {
			// exporter-toolkit reads a relative path from the config's directory.
			file = filepath.Join(filepath.Dir(path), file)
		}
		if err := checkRegularFile(file, maxTLSFileSize); err != nil {
			return errors.New(f.setting + ": " + err.Error())
		}
	}
	users := make([]string, 0, len(c.Users))
	for user := range c.Users {
		users = append(users, user)
	}
	slices.Sort(users)
	for i, user := range users {
		// A hash that is not bcrypt is Validate's to refuse.
		if cost, err := bcrypt.Cost([]byte(c.Users[user])); err == nil && cost > maxBcryptCost {
			// The user is named by its place: a user name can be a secret too.
			return fmt.Errorf("basic_auth_users: the hash of user %d of %d has bcrypt cost %d, more than %d: "+
				"each step doubles the time a password check takes (about a second at 14); hash it again with a lower cost (10 is usual)", i+1, len(users), cost, maxBcryptCost)
		}
	}
	return nil
}

// checkRegularFile reads nothing; a missing file is the caller's.
func checkRegularFile(path string, limit int64) error {
	info, err := os.Stat(path)
	if err != nil {
		return nil
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("not a regular file (%s)", info.Mode().Type())
	}
	if info.Size() > limit {
		return fmt.Errorf("%d bytes, more than the %d a certificate, key or CA bundle needs", info.Size(), limit)
	}
	return nil
}

// redactWebConfigPaths: exporter-toolkit's errors quote the paths.
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
	redactions := []redact.Renaming{{Path: path, Name: "the file"}}
	for _, f := range []struct{ value, setting string }{
		{c.TLS.Cert, "cert_file"}, {c.TLS.Key, "key_file"}, {c.TLS.CA, "client_ca_file"},
	} {
		if f.value == "" {
			continue
		}
		redactions = append(redactions, redact.Renaming{Path: f.value, Name: f.setting})
		if !filepath.IsAbs(f.value) {
			redactions = append(redactions, redact.Renaming{Path: filepath.Join(filepath.Dir(path), f.value), Name: f.setting})
		}
	}
	return redact.ReplacePaths(msg, redactions)
}

// redactingHandler: the toolkit reads --web.config.file on every request and logs its path when it cannot.
type redactingHandler struct {
	slog.Handler
	configPath string
}

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
