// Package journalfile writes real systemd journal files for tests: the
// journal export format (systemd's docs/JOURNAL_EXPORT_FORMATS.md) piped
// into Debian's systemd-journal-remote, which stores every field as given,
// journald's trusted ones (_UID, _SYSTEMD_UNIT, _COMM, _BOOT_ID) included.
package journalfile

import (
	"bytes"
	"encoding/binary"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// Entry is one entry's fields; __REALTIME_TIMESTAMP and
// __MONOTONIC_TIMESTAMP (µs) and _BOOT_ID are the journal's own.
type Entry map[string]string

const install = "apt-get install --no-install-recommends systemd-journal-remote"

// remote finds systemd-journal-remote, which Debian installs outside $PATH;
// without it the test skips, or fails under SPARK_REQUIRE_PACKAGES=1.
func remote(t testing.TB) string {
	t.Helper()
	for _, p := range []string{"/usr/lib/systemd/systemd-journal-remote", "/lib/systemd/systemd-journal-remote"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("systemd-journal-remote"); err == nil {
		return p
	}
	if os.Getenv("SPARK_REQUIRE_PACKAGES") == "1" {
		t.Fatal("systemd-journal-remote not installed: " + install)
	}
	t.Skip("systemd-journal-remote not installed: SKIPPED; " + install + " runs this test")
	return ""
}

// Export is entries in the export format, fields in name order; a value
// holding a newline is written in the format's binary form.
func Export(entries []Entry) []byte {
	var b bytes.Buffer
	for _, e := range entries {
		for _, k := range slices.Sorted(maps.Keys(e)) {
			v := e[k]
			if !strings.Contains(v, "\n") {
				b.WriteString(k + "=" + v + "\n")
				continue
			}
			b.WriteString(k + "\n")
			binary.Write(&b, binary.LittleEndian, uint64(len(v)))
			b.WriteString(v + "\n")
		}
		b.WriteString("\n")
	}
	return b.Bytes()
}

// Write makes path (ending in .journal) a journal file holding export.
func Write(t testing.TB, path string, export []byte) {
	t.Helper()
	cmd := exec.Command(remote(t), "--output="+path, "-")
	cmd.Stdin = bytes.NewReader(export)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("systemd-journal-remote: %v\n%s", err, out)
	}
}

// WriteEntries is Write of Export(entries).
func WriteEntries(t testing.TB, path string, entries []Entry) {
	t.Helper()
	Write(t, path, Export(entries))
}
