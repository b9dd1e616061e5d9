package main

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/prometheus/exporter-toolkit/web"
	"go.yaml.in/yaml/v3"
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
		return fmt.Errorf("invalid --web.config.file: %s", redactWebConfigPaths(withoutPath(err), path))
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
	type redaction struct{ old, new string }
	redactions := []redaction{{path, "the file"}}
	for _, f := range []struct{ value, setting string }{
		{c.TLS.Cert, "cert_file"}, {c.TLS.Key, "key_file"}, {c.TLS.CA, "client_ca_file"},
	} {
		if f.value == "" {
			continue
		}
		redactions = append(redactions, redaction{f.value, f.setting})
		if !filepath.IsAbs(f.value) {
			// exporter-toolkit reads a relative path from the config's directory.
			redactions = append(redactions, redaction{filepath.Join(filepath.Dir(path), f.value), f.setting})
		}
	}
	// The longest first, so that a path is not half replaced by one it
	// contains.
	slices.SortFunc(redactions, func(a, b redaction) int { return cmp.Compare(len(b.old), len(a.old)) })
	for _, r := range redactions {
		msg = strings.ReplaceAll(msg, r.old, r.new)
	}
	return msg
}
