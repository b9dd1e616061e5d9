package hostfs

import (
	"errors"
	"io/fs"
)

// TreeFS is the part of a file system a Tree reads: fs.ReadFileFS and
// fs.ReadDirFS together, with names relative to a mount point
// ("class/thermal"). os.DirFS and fstest.MapFS are both one.
type TreeFS interface {
	ReadFile(name string) ([]byte, error)
	ReadDir(name string) ([]fs.DirEntry, error)
}

// Problem is a file that was there but could not be read or parsed. File
// is relative to the mount point; Err does not name the mount point
// either.
type Problem struct {
	File string
	Err  error
}

func (p Problem) Error() string { return p.File + ": " + p.Err.Error() }

// Tree walks a sysfs tree for one discovery: a file that is absent is no
// problem, one that cannot be read is noted and the walk goes on, and a
// read that blocks stops the walk (every later read answers nothing), so
// that a wedged attribute costs one deadline, not one per file.
type Tree struct {
	FS TreeFS
	// Absent tells the errors that mean "this attribute is not there";
	// nil means fs.ErrNotExist alone.
	Absent   func(error) bool
	Problems []Problem
	Blocked  *Problem
}

// Problem notes that file could not be read or parsed.
func (t *Tree) Problem(file string, err error) {
	t.Problems = append(t.Problems, Problem{File: file, Err: WithoutPath(err)})
}

func (t *Tree) absent(err error) bool {
	if t.Absent != nil {
		return t.Absent(err)
	}
	return errors.Is(err, fs.ErrNotExist)
}

// gaveNothing tells whether a read of name gave nothing (absent,
// unreadable or blocked), noting a problem when it was not simply absent.
func (t *Tree) gaveNothing(name string, err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, ErrBlocked):
		t.Blocked = &Problem{File: name, Err: WithoutPath(err)}
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

// Dir lists name; ok is false when it is absent, unreadable (noted) or
// the walk has stopped. A listing cut short by an error keeps what it
// read.
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

// Entries is Dir's listing alone, for a walk to which an absent directory
// is simply nothing to walk.
func (t *Tree) Entries(name string) []fs.DirEntry {
	entries, _ := t.Dir(name)
	return entries
}
