// Package hostfs is the one way the exporter reads the host's
// pseudo-filesystems, /proc and /sys, at the mount point a flag names
// (--path.procfs): whole small files into a buffer the caller keeps, the
// per-process files of a /proc tree with some kept open from scan to scan
// (Processes), and errors rendered without the paths they carry (Redact,
// WithoutPath), since a mount point may be a private path.
//
// Every read of a file's contents goes through readAll: a bound on a file's
// size, or a deadline on a read that the kernel may block, goes there and
// holds for every caller.
//
// The reads are system calls on a descriptor rather than os.ReadFile, which
// costs seven system calls a file (openat, fcntl, epoll_ctl, fstat, two
// reads, close) and a new buffer each time, which for a /proc file (size 0)
// starts at 512 bytes and is grown and read again until the file fits
// (docs/performance.md).
package hostfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
)

// FS is a pseudo-filesystem mounted at a directory: /proc, or wherever
// --path.procfs says the host's is.
type FS struct{ root string }

// New returns the filesystem mounted at root.
func New(root string) FS { return FS{root: root} }

// Path is the path of name, slash-separated and relative to the mount
// point, on this host.
func (f FS) Path(name string) string { return filepath.Join(f.root, filepath.FromSlash(name)) }

// CheckRoot tells whether the mount point is a directory, with an error
// that names no path.
func (f FS) CheckRoot() error {
	info, err := os.Stat(f.root)
	if err != nil {
		return WithoutPath(err)
	}
	if !info.IsDir() {
		return errNotDir
	}
	return nil
}

var errNotDir = errors.New("not a directory")

// ReadFile reads the whole file name (relative to the mount point) into
// buf, whose contents it replaces, and returns it, grown if the file did
// not fit. Errors are *fs.PathError, as os.ReadFile's are. On error the
// buffer is returned empty, so that the caller may keep it for the next
// read.
//
// It makes an openat, reads into the buffer until the end of the file, and
// closes: for the pool collector's three files 23 µs instead of 43 µs with
// os.ReadFile on a Linux host.
func (f FS) ReadFile(name string, buf []byte) ([]byte, error) {
	path := f.Path(name)
	fd, err := retry(func() (int, error) {
		return syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	})
	if err != nil {
		return buf[:0], &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer syscall.Close(fd)
	buf, err = readAll(fd, buf, seqFile)
	if err != nil {
		return buf, &fs.PathError{Op: "read", Path: path, Err: err}
	}
	return buf, nil
}

// fileKind is how a file is read to its end.
type fileKind struct {
	// at0 reads with pread from offset 0, for a file kept open and read
	// again: procfs writes a task's file afresh for a read at offset 0.
	at0 bool
	// shortIsEnd stops at a read that does not fill the buffer, saving
	// the read that would return 0.
	shortIsEnd bool
	// grow is what an empty buffer is first given.
	grow int
}

var (
	// seqFile is a file such as meminfo or vmstat: procfs hands a
	// seq_file out about a page a read, whatever the buffer, so a short
	// read is not its end. /proc/vmstat, the largest read this way, is
	// about 4 KiB.
	seqFile = fileKind{grow: 8 << 10}
	// taskFile is a /proc/PID file: procfs writes it whole (a task's
	// seq_file, its command line) unless the buffer is full, and a
	// regular file (a test tree) is short only at its end.
	taskFile = fileKind{at0: true, shortIsEnd: true, grow: 512}
)

// readAll reads the file open at fd from its start into buf[:0], grown as
// needed.
func readAll(fd int, buf []byte, kind fileKind) ([]byte, error) {
	buf = buf[:0]
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, max(kind.grow, cap(buf)))
		}
		n, err := retry(func() (int, error) {
			if kind.at0 {
				return syscall.Pread(fd, buf[len(buf):cap(buf)], int64(len(buf)))
			}
			return syscall.Read(fd, buf[len(buf):cap(buf)])
		})
		if err != nil {
			return buf[:0], err
		}
		if n <= 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
		if kind.shortIsEnd && len(buf) < cap(buf) {
			return buf, nil
		}
	}
}

// retry repeats a system call that a signal interrupted (EINTR).
func retry(call func() (int, error)) (int, error) {
	for {
		n, err := call()
		if !errors.Is(err, syscall.EINTR) {
			return n, err
		}
	}
}
