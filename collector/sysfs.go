package collector

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/hostfs"
	"github.com/spark-exporter/spark_exporter/internal/platform"
)

// sysfs is the sysfs mount point as a platform.FS and a fabric.FS: names
// are relative to it and so are the files errors name, never the mount
// point. Every file is bounded by the size of a sysfs attribute.
type sysfs struct {
	fs hostfs.FS
	// What the last readAll read, kept for the next.
	arena []byte
	reads []sysfsRead
}

// sysfsRead is one file of a readAll: arena[start:end], or why not.
type sysfsRead struct {
	start, end int
	err        error
}

func newSysfs(root string, timeout time.Duration) *sysfs {
	return &sysfs{fs: hostfs.New(root).WithTimeout(timeout).Sysfs()}
}

func (d *sysfs) ReadFile(name string) ([]byte, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	data, err := d.fs.ReadFile(name, nil)
	return data, d.relative(name, err)
}

func (d *sysfs) ReadDir(name string) ([]fs.DirEntry, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	entries, err := d.fs.ReadDir(name)
	return entries, d.relative(name, err)
}

// relative makes the path of an *fs.PathError name, or, for a read that
// blocked (whose error names the file the batch was reading), that file
// relative to the mount point.
func (d *sysfs) relative(name string, err error) error {
	pe, ok := errors.AsType[*fs.PathError](err)
	if !ok {
		return err
	}
	if errors.Is(err, hostfs.ErrBlocked) {
		rel, relErr := filepath.Rel(d.fs.Path("."), pe.Path)
		if relErr != nil || strings.HasPrefix(rel, "..") {
			return hostfs.WithoutPath(err)
		}
		name = filepath.ToSlash(rel)
	}
	return &fs.PathError{Op: pe.Op, Path: name, Err: pe.Err}
}

// readAll reads the files names in one batch, under one deadline: value(i)
// is then what the read of names[i] gave, valid until the next readAll.
// A read that blocks fails the batch, naming its file: the next file may
// block as long.
func (d *sysfs) readAll(names []string, maxValue int) (value func(i int) ([]byte, error), err error) {
	arena, reads := d.arena[:0], d.reads[:0]
	// The batch's until it has returned.
	d.arena, d.reads = nil, nil
	var stopped error
	if blocked := d.fs.Batch(func(r *hostfs.Reader) error {
		var buf []byte
		for _, name := range names {
			data, err := r.ReadFile(name, buf)
			if errors.Is(err, hostfs.ErrBlocked) {
				stopped = err
				return nil
			}
			buf = data
			if err == nil && maxValue > 0 && len(data) > maxValue {
				err = &fs.PathError{Op: "read", Path: name, Err: fmt.Errorf("more than %d bytes, not a value", maxValue)}
			}
			err = d.relative(name, err)
			start := len(arena)
			if err == nil {
				arena = append(arena, data...)
			}
			reads = append(reads, sysfsRead{start, len(arena), err})
		}
		return nil
	}); blocked != nil {
		return nil, d.relative("", blocked)
	}
	if stopped != nil {
		return nil, d.relative("", stopped)
	}
	d.arena, d.reads = arena, reads
	return func(i int) ([]byte, error) {
		return arena[reads[i].start:reads[i].end], reads[i].err
	}, nil
}

// platformValues reads the value files of a platform layout.
func (d *sysfs) platformValues(l *platform.Layout) platform.Snapshot {
	value, err := d.readAll(l.ValueFiles(), platform.MaxValue)
	if err != nil {
		return l.BlockedAt(err)
	}
	return l.Snapshot(value)
}
