package journal

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/testing/journalfile"
	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
)

// The boot of testdata/journal/spark.export.
var fixtureBoot = [16]byte{0x4f, 0x1c, 0x2a, 0x9e, 0x7b, 0x3d, 0x4e, 0x8a, 0x9c, 0x61, 0x2d, 0x5f, 0x8e, 0x0b, 0x7a, 0x13}

const fixtureBootHex = "4f1c2a9e7b3d4e8a9c612d5f8e0b7a13"

func fixtureExport(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testexporter.Root(t), "testdata", "journal", "spark.export"))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func openReader(t *testing.T, src Source) *Reader {
	t.Helper()
	r := New(src)
	r.Start()
	t.Cleanup(func() { r.Close() })
	return r
}

// killEntry is one earlyoom kill of pid at second s of the fixture's boot.
func killEntry(pid, s int) journalfile.Entry {
	return journalfile.Entry{
		"__REALTIME_TIMESTAMP":  strconv.Itoa(1791036000_000000 + s*1_000000),
		"__MONOTONIC_TIMESTAMP": strconv.Itoa(3600_000000 + s*1_000000),
		"_BOOT_ID":              fixtureBootHex,
		"_TRANSPORT":            "stdout",
		"_UID":                  "61934",
		"_COMM":                 "earlyoom",
		"_SYSTEMD_UNIT":         "earlyoom.service",
		"MESSAGE":               "sending SIGTERM to process " + strconv.Itoa(pid) + ` uid 1000 "python3": badness 900, VmRSS 60000 MiB`,
	}
}

// The fixture's journal, as a real journal file: each killer's kill this
// boot counted once, the previous boot's and every forged line not at all.
func TestReaderCountsTheFixture(t *testing.T) {
	dir := t.TempDir()
	journalfile.Write(t, filepath.Join(dir, "spark.journal"), fixtureExport(t))
	st := openReader(t, Source{Dir: dir, Boot: fixtureBoot}).State()
	want := map[string]uint64{systemdOomd: 1, earlyOOM: 1, nohang: 1}
	if !st.Readable || st.Err != nil || !maps.Equal(st.Kills, want) {
		t.Errorf("state %+v, want readable with kills %v", st, want)
	}
}

// Another boot's journal counts nothing.
func TestReaderCountsOnlyThisBoot(t *testing.T) {
	dir := t.TempDir()
	journalfile.Write(t, filepath.Join(dir, "spark.journal"), fixtureExport(t))
	other := fixtureBoot
	other[0] ^= 1
	st := openReader(t, Source{Dir: dir, Boot: other}).State()
	if !st.Readable || st.Kills[earlyOOM] != 0 || st.Kills[systemdOomd] != 0 || st.Kills[nohang] != 0 {
		t.Errorf("state %+v, want readable with nothing counted", st)
	}
}

// New entries are counted as they come: a file journald adds to the
// directory, and entries appended to a file already read.
func TestReaderFollows(t *testing.T) {
	dir := t.TempDir()
	first := filepath.Join(dir, "a.journal")
	journalfile.WriteEntries(t, first, []journalfile.Entry{killEntry(100, 1)})
	r := openReader(t, Source{Dir: dir, Boot: fixtureBoot})
	if n := r.State().Kills[earlyOOM]; n != 1 {
		t.Fatalf("%d kills at start, want 1", n)
	}
	journalfile.WriteEntries(t, filepath.Join(dir, "b.journal"), []journalfile.Entry{killEntry(200, 1000)})
	testexporter.Eventually(t, 30*time.Second, func() bool { return r.State().Kills[earlyOOM] == 2 }, "the new file's kill counted")
	journalfile.WriteEntries(t, first, []journalfile.Entry{killEntry(300, 2000)})
	testexporter.Eventually(t, 30*time.Second, func() bool { return r.State().Kills[earlyOOM] == 3 }, "the appended kill counted")
}

// A journal that cannot be read is reported, with why, and counts nothing.
func TestReaderUnreadable(t *testing.T) {
	empty := t.TempDir()
	for _, tc := range []struct {
		name string
		src  Source
		err  error
	}{
		{"no such directory", Source{Dir: filepath.Join(empty, "none"), Boot: fixtureBoot}, os.ErrNotExist},
		{"no journal file", Source{Dir: empty, Boot: fixtureBoot}, errNoFiles},
		{"no libsystemd", Source{Dir: empty, Boot: fixtureBoot, Library: "libsystemd-nonexistent.so.0"}, nil},
		{"the boot unknown", Source{Dir: empty}, errNoBoot},
	} {
		st := openReader(t, tc.src).State()
		if st.Readable || st.Err == nil || tc.err != nil && !errors.Is(st.Err, tc.err) {
			t.Errorf("%s: state %+v, want not readable because %v", tc.name, st, tc.err)
		}
		if len(st.Kills) != len(Killers) {
			t.Errorf("%s: kills %v, want every killer at 0", tc.name, st.Kills)
		}
	}
}

// A corrupt file beside a good one: the good one is counted, the other
// skipped, nothing hangs.
func TestReaderSkipsACorruptFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.journal")
	journalfile.Write(t, good, fixtureExport(t))
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	garbage := make([]byte, 1<<16)
	for i := range garbage {
		garbage[i] = byte(i*7 + 3)
	}
	flipped := append([]byte(nil), data...)
	for i := 4096; i < len(flipped); i += 61 {
		flipped[i] ^= 0xa5
	}
	for name, content := range map[string][]byte{
		"garbage.journal":   garbage,
		"header.journal":    append([]byte("LPKSHHRH"), garbage...),
		"truncated.journal": data[:len(data)/3],
		"flipped.journal":   flipped,
		"empty.journal":     nil,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o640); err != nil {
			t.Fatal(err)
		}
	}
	st := openReader(t, Source{Dir: dir, Boot: fixtureBoot}).State()
	if !st.Readable || st.Kills[earlyOOM] < 1 || st.Kills[systemdOomd] < 1 || st.Kills[nohang] < 1 {
		t.Errorf("state %+v, want the good file's kills", st)
	}
}
