package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/spark-exporter/spark_exporter/internal/testing/journalfile"
	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
)

// noJournal is a --journal.path that does not exist: output compared with
// a golden file must not depend on the test machine's journal.
const noJournal = "--journal.path=/nonexistent/journal"

// journalFixture writes testdata/journal/spark.export into dir as a real
// journal file, mode 0640 and group gid, as journald keeps the system
// journal (root:systemd-journal).
func journalFixture(t *testing.T, dir string, gid int) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testexporter.Root(t), "testdata", "journal", "spark.export"))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "system.journal")
	journalfile.Write(t, file, data)
	if err := os.Chown(file, 0, gid); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(file, 0o640); err != nil {
		t.Fatal(err)
	}
}

func journalProc(t *testing.T) string {
	return filepath.Join(testexporter.Root(t), "testdata", "journal", "proc")
}

// The journal collector on the fixture's journal, read from real journal
// files: each killer's kill this boot once; the previous boot's kill, a
// user's logger and systemd-cat lines with a killer's text, and a shell in
// earlyoom's unit not at all.
func TestGoldenJournal(t *testing.T) {
	if os.Getenv("SPARK_TEST_EXEC_WRAPPER") != "" {
		// scripts/test-arm64.sh: qemu's sysroot is the cross libc alone,
		// with no libsystemd.so.0 of the binary's architecture to dlopen.
		t.Skip("under emulation the binary finds no libsystemd of its architecture: run natively")
	}
	dir := t.TempDir()
	journalFixture(t, dir, 0)
	p := testexporter.Start(t, nil, "--journal.path="+dir, "--path.procfs="+journalProc(t),
		noGPU, noKmsg, "--web.disable-exporter-metrics")
	golden(t, "journal.metrics", normalise(p.Get(t, "/metrics?collect[]=journal")))
}

// The exporter as a user outside the group that may read the journal
// (systemd-journal, which the .deb's unit adds): the journal series are
// absent, its supported series 0, the collector and the scrape fine, the
// log says why without a path. With the group, the kills are counted.
func TestJournalNeedsItsGroup(t *testing.T) {
	const group = 4242 // the journal files' group, as systemd-journal's
	base := nobodyDir(t)
	dir := filepath.Join(base, "journal")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	journalFixture(t, dir, group)
	args := []string{"--journal.path=" + dir, "--path.procfs=" + journalProc(t), noKmsg}

	p := startAsNobody(t, base, args...)
	m := p.Get(t, "/metrics")
	for series, want := range map[string]float64{
		`spark_journal_field_supported{field="journal"}`:      0,
		`spark_scrape_collector_success{collector="journal"}`: 1,
	} {
		if v, ok := testexporter.Value(m, series); !ok || v != want {
			t.Errorf("without the group: %s = %v (present %v), want %v", series, v, ok, want)
		}
	}
	if strings.Contains(m, "spark_journal_oom_kills_total") {
		t.Errorf("without the group, kills are exported")
	}
	p.Stop(t)
	if logs := p.Logs(); !strings.Contains(logs, "the journal cannot be read") || strings.Contains(logs, base) {
		t.Errorf("want one line saying the journal cannot be read, naming no path:\n%s", logs)
	}

	cmd := exec.Command(nobodyCopy(t, testexporter.Binary(t), base),
		append([]string{"--web.listen-address=127.0.0.1:0", noGPU}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody.Uid, Gid: nobody.Gid, Groups: []uint32{group}}}
	cmd.Dir = base
	m = testexporter.StartCommand(t, cmd, nil).Get(t, "/metrics")
	for _, k := range []string{"systemd-oomd", "earlyoom", "nohang"} {
		if v, ok := testexporter.Value(m, `spark_journal_oom_kills_total{killer="`+k+`"}`); !ok || v != 1 {
			t.Errorf("with the group: %s kills = %v (present %v), want 1", k, v, ok)
		}
	}
}
