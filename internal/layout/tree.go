// Package layout is how a sysfs collector remembers what it found: a
// discovery (Tree) walks for what does not change while the machine runs
// (devices, channels, zones, their names and files), the collector keeps it
// (Kept), and a scrape then reads only the value files.
//
// prometheus/procfs's sysfs class readers use os.ReadFile: no size bound, no
// deadline, through links, one unreadable file failing the whole class.
package layout

import (
	"errors"
	"io/fs"
	"syscall"

	"github.com/spark-exporter/spark_exporter/internal/hostfs"
	"github.com/spark-exporter/spark_exporter/internal/redact"
)

// FS is what a walk reads through, names relative to the sysfs mount point.
type FS interface {
	ReadFile(name string) ([]byte, error)
	ReadDir(name string) ([]fs.DirEntry, error)
}

// Problem is a file that was there but could not be read or parsed; neither
// File nor Err names the mount point.
type Problem struct {
	File string
	Err  error
}

func (p Problem) Error() string { return p.File + ": " + p.Err.Error() }

// Tree walks a sysfs tree: an absent file is no problem, an unreadable one
// is noted, and a read that blocks stops the walk, so that a wedged
// attribute costs one deadline, not one per file.
type Tree struct {
	FS FS
	// Absent tells the errors that mean "this attribute is not there";
	// nil means fs.ErrNotExist alone.
	Absent   func(error) bool
	Problems []Problem
	Blocked  *Problem
}

// Problem notes that file could not be read or parsed.
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

// File reads name; ok is false when it is absent, unreadable (noted) or
// the walk has stopped.
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

// Dir lists name, ok as File's; a listing cut short by an error keeps what
// it read.
func (t *Tree) Dir(name string) (entries []fs.DirEntry, ok bool) {
	if t.Blocked != nil {
		return nil, false
	}
	entries, err := t.FS.ReadDir(name)
	return entries, !t.gaveNothing(name, err)
}

// Parsed reads name and parses it; ok is false when absent, unreadable or
// not parsed (the last two noted).
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

// Entries is Dir's listing alone: an absent directory is nothing to walk.
func (t *Tree) Entries(name string) []fs.DirEntry {
	entries, _ := t.Dir(name)
	return entries
}

// Gone tells a read error that says the layout changed under the
// collector: the file is gone, or its driver was unbound (ENODEV).
func Gone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENODEV)
}
