// Package layout is how a sysfs collector keeps what does not change while
// the machine runs, so that a scrape reads only the value files.
//
// procfs's sysfs class readers use os.ReadFile: no size bound, no deadline,
// through links, one unreadable file failing the whole class.
package layout

import (
	"errors"
	"io/fs"
	"syscall"

	"github.com/spark-exporter/spark_exporter/internal/hostfs"
	"github.com/spark-exporter/spark_exporter/internal/redact"
)

// FS is the sysfs mount.
type FS interface {
	ReadFile(name string) ([]byte, error)
	ReadDir(name string) ([]fs.DirEntry, error)
}

// Problem is a file that could not be read or parsed; it never names the mount point.
type Problem struct {
	File string
	Err  error
}

func (p Problem) Error() string { return p.File + ": " + p.Err.Error() }

// Tree notes an unreadable file and stops at a read that blocks, so that a
// wedged attribute costs one deadline, not one per file.
type Tree struct {
	FS       FS
	Absent   func(error) bool // nil: fs.ErrNotExist alone
	Problems []Problem
	Blocked  *Problem
}

func (t *Tree) Problem(file string, err error) {
	t.Problems = append(t.Problems, Problem{File: file, Err: redact.WithoutPath(err)})
}

func (t *Tree) absent(err error) bool {
	if t.Absent != nil {
		return t.Absent(err)
	}
	return errors.Is(err, fs.ErrNotExist)
}

func (t *Tree) gaveNothing(name string, err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, hostfs.ErrBlocked):
		t.Blocked = &Problem{File: name, Err: redact.WithoutPath(err)}
	case !t.absent(err):
		t.Problem(name, err)
	}
	return true
}

func (t *Tree) File(name string) (data []byte, ok bool) {
	if t.Blocked != nil {
		return nil, false
	}
	data, err := t.FS.ReadFile(name)
	if t.gaveNothing(name, err) {
		return nil, false
	}
	return data, true
}

// Dir keeps what a listing cut short by an error read.
func (t *Tree) Dir(name string) (entries []fs.DirEntry, ok bool) {
	if t.Blocked != nil {
		return nil, false
	}
	entries, err := t.FS.ReadDir(name)
	return entries, !t.gaveNothing(name, err)
}

func Parsed[T any](t *Tree, name string, parse func([]byte) (T, error)) (T, bool) {
	var zero T
	data, ok := t.File(name)
	if !ok {
		return zero, false
	}
	v, err := parse(data)
	if err != nil {
		t.Problem(name, err)
		return zero, false
	}
	return v, true
}

func (t *Tree) Entries(name string) []fs.DirEntry {
	entries, _ := t.Dir(name)
	return entries
}

// Gone: the file is gone, or its driver was unbound (ENODEV).
func Gone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENODEV)
}
