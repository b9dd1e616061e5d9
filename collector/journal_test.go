package collector

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/spark-exporter/spark_exporter/internal/hostfs"
	"github.com/spark-exporter/spark_exporter/internal/journal"
	"github.com/spark-exporter/spark_exporter/internal/testing/journalfile"
)

// journalFixture is a directory holding testdata/journal/spark.export as a
// real journal file, and that journal's boot.
func journalFixture(t *testing.T) journal.Source {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "testdata", "journal", "spark.export"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	journalfile.Write(t, filepath.Join(dir, "spark.journal"), data)
	return journal.Source{Dir: dir, Boot: readBootID(hostfs.New(filepath.Join("..", "testdata", "journal", "proc")))}
}

// The fixture's journal: each killer's kill this boot, every killer
// exported, the forged lines and the previous boot's kill not counted.
func TestJournalCollector(t *testing.T) {
	c := newJournalCollector(journalFixture(t), nopLogger())
	c.start()
	defer c.Close()
	got, err := collect(t, c)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		`spark_journal_field_supported{field="journal"}`:       1,
		`spark_journal_oom_kills_total{killer="systemd-oomd"}`: 1,
		`spark_journal_oom_kills_total{killer="earlyoom"}`:     1,
		`spark_journal_oom_kills_total{killer="nohang"}`:       1,
	}
	if len(got) != len(want) {
		t.Errorf("got %d series, want %d: %v", len(got), len(want), got)
	}
	for name, v := range want {
		if g, ok := got[name]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", name, g, ok, v)
		}
	}
}

// Without a readable journal (no such directory, no boot id, no
// libsystemd), the collector succeeds with only the supported series at 0.
func TestJournalCollectorUnreadable(t *testing.T) {
	src := journalFixture(t)
	for name, s := range map[string]journal.Source{
		"no such directory": {Dir: filepath.Join(t.TempDir(), "absent"), Boot: src.Boot},
		"no boot id":        {Dir: src.Dir},
		"no libsystemd":     {Dir: src.Dir, Boot: src.Boot, Library: "libsystemd-absent.so.0"},
	} {
		c := newJournalCollector(s, nopLogger())
		c.start()
		got, err := collect(t, c)
		c.Close()
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
		want := map[string]float64{`spark_journal_field_supported{field="journal"}`: 0}
		if len(got) != 1 || got[`spark_journal_field_supported{field="journal"}`] != 0 {
			t.Errorf("%s: got %v, want %v", name, got, want)
		}
	}
}
