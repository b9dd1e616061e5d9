package layout

import (
	"errors"
	"io/fs"
	"strings"
	"syscall"
	"testing"
	"testing/fstest"

	"github.com/spark-exporter/spark_exporter/internal/hostfs"
)

// failingFS answers from files, except for the names in errs.
type failingFS struct {
	files fstest.MapFS
	errs  map[string]error
}

func (f failingFS) ReadFile(name string) ([]byte, error) {
	if err, ok := f.errs[name]; ok {
		return nil, &fs.PathError{Op: "read", Path: "/sys/" + name, Err: err}
	}
	return f.files.ReadFile(name)
}

func (f failingFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if err, ok := f.errs[name]; ok {
		return nil, &fs.PathError{Op: "open", Path: "/sys/" + name, Err: err}
	}
	return f.files.ReadDir(name)
}

func TestTree(t *testing.T) {
	fsys := failingFS{
		files: fstest.MapFS{"a/ok": {Data: []byte("1\n")}, "a/bad": {Data: []byte("x")}},
		errs:  map[string]error{"a/eio": syscall.EIO, "a/inval": syscall.EINVAL, "a/wedged": hostfs.ErrBlocked},
	}
	tr := &Tree{FS: fsys}
	if _, ok := tr.File("a/missing"); ok || len(tr.Problems) != 0 {
		t.Errorf("an absent file: ok %v, problems %v; want neither", ok, tr.Problems)
	}
	if _, ok := tr.File("a/eio"); ok || len(tr.Problems) != 1 || tr.Problems[0].File != "a/eio" {
		t.Errorf("an unreadable file: ok %v, problems %v; want one naming it", ok, tr.Problems)
	}
	if _, ok := tr.File("a/inval"); ok || len(tr.Problems) != 2 {
		t.Errorf("EINVAL without Absent: problems %v, want it noted", tr.Problems)
	}
	parse := func(b []byte) (int, error) {
		if string(b) == "1\n" {
			return 1, nil
		}
		return 0, errors.New("not a number")
	}
	if v, ok := Parsed(tr, "a/ok", parse); !ok || v != 1 {
		t.Errorf("Parsed(a/ok) = %v, %v; want 1, true", v, ok)
	}
	if _, ok := Parsed(tr, "a/bad", parse); ok || len(tr.Problems) != 3 {
		t.Errorf("a file that does not parse: ok %v, problems %v; want it noted", ok, tr.Problems)
	}
	for _, p := range tr.Problems {
		if strings.Contains(p.Err.Error(), "/sys/") {
			t.Errorf("a problem names the mount point: %q", p.Err)
		}
	}
	if _, ok := tr.File("a/wedged"); ok || tr.Blocked == nil || tr.Blocked.File != "a/wedged" {
		t.Fatalf("a blocked read: ok %v, blocked %v; want the walk stopped at it", ok, tr.Blocked)
	}
	if _, ok := tr.File("a/ok"); ok {
		t.Error("a read after the walk stopped answered")
	}
	if entries := tr.Entries("a"); entries != nil {
		t.Errorf("a listing after the walk stopped: %v", entries)
	}

	lenient := &Tree{FS: fsys, Absent: func(err error) bool { return errors.Is(err, syscall.EINVAL) }}
	if _, ok := lenient.File("a/inval"); ok || len(lenient.Problems) != 0 {
		t.Errorf("EINVAL with Absent: ok %v, problems %v; want it absent", ok, lenient.Problems)
	}
	if entries, ok := lenient.Dir("a"); !ok || len(entries) != 2 {
		t.Errorf("Dir(a) = %v, %v; want its two entries", entries, ok)
	}
}
