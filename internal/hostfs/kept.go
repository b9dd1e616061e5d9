package hostfs

import (
	"errors"
	"io/fs"
	"syscall"
)

// KeptFiles reads files that are read again and again (the sysfs values a
// scrape reads) through descriptors kept open: one pread at offset 0 each,
// which makes sysfs and procfs write the file afresh, instead of an open,
// a read and a close. Reads are under the FS's deadline and bounds.
// A KeptFiles is for one goroutine at a time.
type KeptFiles struct {
	fs   FS
	kept map[string]int
}

// KeptFiles returns a reader that keeps the files it reads open. Close it
// to release them.
func (f FS) KeptFiles() *KeptFiles { return &KeptFiles{fs: f, kept: map[string]int{}} }

// Read reads the file name into buf[:0], grown as needed, opening it on
// first use. Errors are *fs.PathError naming the file relative to the mount
// point; a file that failed is opened afresh next time (it may have been
// replaced). A read that blocks past the deadline returns nil.
func (k *KeptFiles) Read(name string, buf []byte) ([]byte, error) {
	if !fs.ValidPath(name) {
		return buf[:0], &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	fd, kept := k.kept[name]
	delete(k.kept, name)
	if !kept {
		fd = -1
	}
	var (
		data []byte
		op   = "read"
		err  error
	)
	limit := k.fs.limitFor(name)
	if blocked := k.fs.workers.run(k.fs, func(r *Reader) error {
		if fd < 0 {
			op = "open"
			if fd, err = r.openAt(-1, name, name); err != nil {
				fd, data = -1, buf[:0]
				return nil
			}
			op = "read"
		}
		data, err = r.readFd(fd, name, name, buf, taskFile, limit)
		return nil
	}, func() {
		if fd >= 0 {
			syscall.Close(fd)
		}
	}); blocked != nil {
		return nil, blocked
	}
	if errors.Is(err, ErrBlocked) {
		// Still blocked: an earlier read of the file has not returned.
		if fd >= 0 {
			syscall.Close(fd)
		}
		return nil, err
	}
	if err != nil {
		if fd >= 0 {
			syscall.Close(fd)
		}
		return data, &fs.PathError{Op: op, Path: name, Err: err}
	}
	k.kept[name] = fd
	return data, nil
}

// Close closes the files kept open.
func (k *KeptFiles) Close() error {
	for name, fd := range k.kept {
		syscall.Close(fd)
		delete(k.kept, name)
	}
	return nil
}
