package status

import (
	"bytes"
	"html"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spark-exporter/spark_exporter/internal/collected"
	"github.com/spark-exporter/spark_exporter/internal/pool"
)

// The published ranks as the pool collector hands them over: the page and
// the status report name a fragmented pool in the runbook's words; a
// healthy full pool, a fresh one, or one whose compaction rate is not known
// yet are not fragmented. Beside a usable-memory tier the tier leads and
// the fragmentation follows.
func TestPoolFragmented(t *testing.T) {
	const mib = 1 << 20
	f := func(x float64) *float64 { return &x }
	for _, tc := range []struct {
		name        string
		large, fail *float64
		usable      uint64 // MemAvailable; 0: the fixture's
		state, want string
		reportToo   bool
	}{
		{"fragmented rank", f(0), f(2.2), 0, "fragmented",
			"The pool is fragmented: no free block of 32 MiB, and compaction fails 2.2 times a second. The GPU driver's next large allocation can fail", true},
		{"few blocks left", f(20 * 32 * mib), f(2.2), 0, "fragmented",
			"The pool is fragmented: only 0.6 GiB free in blocks of 32 MiB or more (20 blocks' worth; a model load wants 200), and compaction fails 2.2 times a second.", false},
		{"healthy full pool", f(20 * 32 * mib), f(1.0 / 60), 0, "ok", "Usable memory", false},
		{"fresh rank", f(782 * 32 * mib), f(2), 0, "ok", "Usable memory", false},
		{"rate not known yet", f(0), nil, 0, "ok", "Usable memory", false},
		{"low usable memory too", f(0), f(2.2), 10 << 30, "usable_low",
			"Usable memory 10.0 GiB (MemAvailable less free CMA), below 12.0 GiB", false},
	} {
		st := sparkState(t)
		st.Pool.LargeFreeBytes, st.Pool.CompactionFailuresPerSecond = tc.large, tc.fail
		if tc.usable != 0 {
			st.Pool.Snapshot.Available = tc.usable
		}
		m := buildModel(BuildInfo{}, st)
		p := m.Pool
		if p.State != tc.state || !strings.HasPrefix(p.Text, tc.want) {
			t.Errorf("%s: state %q, text %q; want %q, %q…", tc.name, p.State, p.Text, tc.state, tc.want)
		}
		if tc.state == "usable_low" && !strings.Contains(p.Text, "The pool is fragmented: no free block of 32 MiB") {
			t.Errorf("%s: the text %q does not say the pool is fragmented", tc.name, p.Text)
		}
		if !tc.reportToo {
			continue
		}
		page := renderPage(t, m)
		if !strings.Contains(page, html.EscapeString(tc.want)) || !strings.Contains(page, "0.0 GiB; compaction failing 2.2 times a second") {
			t.Errorf("%s: the page does not name the fragmented pool", tc.name)
		}
		report := statusReport(t, m)
		if !strings.Contains(report, "Pool     "+tc.want) ||
			!strings.Contains(report, "large blocks: 0.0 GiB free in blocks of 32 MiB or more; compaction failing 2.2 times a second") {
			t.Errorf("%s: the status report does not name the fragmented pool:\n%s", tc.name, report)
		}
	}
}

// Kernel 7.0.0-1019's CMA accounting (CmaTotal 0 beside CmaFree 0.9 GiB):
// a note on the page and in the status report, no danger, no negative
// figure; a healthy kernel's pool has no note.
func TestPoolCMAAccountingNote(t *testing.T) {
	const want = "The kernel's CMA accounting is wrong: CmaFree 0.9 GiB is above CmaTotal 0.0 GiB"
	snap, err := pool.Read(filepath.Join("..", "..", "testdata", "proc", "cma-anomaly"))
	if err != nil {
		t.Fatal(err)
	}
	st := sparkState(t)
	if m := buildModel(BuildInfo{}, st); len(m.Pool.Notes) != 0 {
		t.Errorf("a healthy kernel's pool has notes %q", m.Pool.Notes)
	}
	st.Pool = &collected.Pool{Snapshot: snap, Reserve: 4 << 30}
	m := buildModel(BuildInfo{}, st)
	p := m.Pool
	if len(p.Notes) != 1 || !strings.HasPrefix(p.Notes[0], want) {
		t.Fatalf("notes %q, want one beginning %q", p.Notes, want)
	}
	if p.State == "usable_low" || p.State == "usable_critical" || p.UsableBytes < 0 || p.HeadroomBytes < -int64(p.ReserveBytes) {
		t.Errorf("state %s, usable %d, headroom %d: the note is no danger", p.State, p.UsableBytes, p.HeadroomBytes)
	}
	if page := renderPage(t, m); !strings.Contains(page, `<ul class="notes" data-list="pool.notes"><li>`+html.EscapeString(want)) {
		t.Error("the page does not list the note")
	}
	if report := statusReport(t, m); !strings.Contains(report, "         note: "+want) {
		t.Errorf("the status report lacks the note:\n%s", report)
	}
}

func renderPage(t *testing.T, m Model) string {
	t.Helper()
	var buf bytes.Buffer
	if err := (&Handler{}).render(&buf, m, newView(m)); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func statusReport(t *testing.T, m Model) string {
	t.Helper()
	var b strings.Builder
	if err := WriteText(&b, m); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
