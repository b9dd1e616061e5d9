// Package hostfs is the one way the exporter reads the host's
// pseudo-filesystems, /proc and /sys, at the mount point a flag names
// (--path.procfs): whole small files into a buffer the caller keeps, the
// per-process files of a /proc tree with some kept open from scan to scan
// (Processes), and errors rendered without the paths they carry (Redact,
// WithoutPath), since a mount point may be a private path.
//
// Every open and read runs under a deadline (deadline.go: a process stuck
// in uninterruptible sleep blocks a read of its files for as long as it is
// stuck), and every read of a file's contents goes through readAll, which
// bounds its size by the kind of file (limitFor): a file beyond the bound,
// a link to /dev/zero say, is an error, not an out-of-memory. A file that
// is a symbolic link is refused (O_NOFOLLOW): procfs and sysfs files are
// never links, and a link in a fixture tree could put any file's contents
// in a label.
//
// The reads are system calls on a descriptor rather than os.ReadFile, which
// costs seven system calls a file (openat, fcntl, epoll_ctl, fstat, two
// reads, close) and a new buffer each time, which for a /proc file (size 0)
// starts at 512 bytes and is grown and read again until the file fits
// (docs/performance.md).
package hostfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"syscall"
	"time"
)

// FS is a pseudo-filesystem mounted at a directory: /proc, or wherever
// --path.procfs says the host's is. Copies share the reads that blocked.
type FS struct {
	root    string
	timeout time.Duration
	// maxSize, when not 0, bounds every file (a sysfs attribute);
	// otherwise limitFor tells by the file's name.
	maxSize int
	workers *workers
}

// New returns the filesystem mounted at root, read with DefaultTimeout.
func New(root string) FS {
	return FS{root: root, timeout: DefaultTimeout, workers: newWorkers()}
}

// WithTimeout returns f with reads under timeout (--path.read-timeout).
func (f FS) WithTimeout(timeout time.Duration) FS {
	if timeout > 0 {
		f.timeout = timeout
	}
	return f
}

// WithMaxSize returns f with every file bounded by n bytes, whatever its
// name: for sysfs, whose attributes are at most a page.
func (f FS) WithMaxSize(n int) FS {
	f.maxSize = n
	return f
}

// MaxSysAttribute bounds a sysfs file: an attribute is at most a page (4
// KiB on x86, up to 64 KiB on arm64); anything larger is not one.
const MaxSysAttribute = 64 << 10

// The bounds on the files read, far above what a kernel writes, so that
// only a file that is not what its name says goes beyond.
const (
	// maxTaskFile bounds a process's stat (about 300 bytes), status
	// (about 1.5 KiB), statm and comm (16 bytes).
	maxTaskFile = 64 << 10
	// maxCmdline bounds a command line: the kernel caps a program's
	// arguments and environment together at 6 MiB (fs/exec.c, since
	// Linux 4.13).
	maxCmdline = 8 << 20
	// maxSeqFile bounds every other file: meminfo (about 1.5 KiB), vmstat
	// (4 KiB), pressure/memory (100 bytes), sys/kernel values.
	maxSeqFile = 1 << 20
)

// limitFor is the bound on the file name.
func (f FS) limitFor(name string) int {
	if f.maxSize > 0 {
		return f.maxSize
	}
	switch path.Base(name) {
	case "cmdline":
		return maxCmdline
	case "stat", "status", "statm", "comm":
		return maxTaskFile
	}
	return maxSeqFile
}

// TooLargeError is a file beyond the bound on its kind.
type TooLargeError struct{ Limit int }

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("larger than %s, not a file of its kind", sizeText(e.Limit))
}

func sizeText(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// openFlags opens a file for reading, refusing a symbolic link.
const openFlags = syscall.O_RDONLY | syscall.O_CLOEXEC | syscall.O_NOFOLLOW

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
// read; a buffer grown for a file beyond its bound is dropped. A read that
// blocks past the deadline fails with a *BlockedError and nil: the
// buffer is still being written to.
//
// It makes an openat, reads into the buffer until the end of the file, and
// closes: for the pool collector's three files 23 µs instead of 43 µs with
// os.ReadFile on a Linux host.
func (f FS) ReadFile(name string, buf []byte) ([]byte, error) {
	// Not the results: the job writes these, and goes on writing after a
	// deadline passed.
	var (
		data []byte
		err  error
	)
	if blocked := f.Batch(func(r *Reader) error {
		data, err = r.ReadFile(name, buf)
		return nil
	}); blocked != nil {
		return nil, blocked
	}
	return data, err
}

// ReadDir lists the directory name, as os.ReadDir does, under the
// deadline.
func (f FS) ReadDir(name string) ([]fs.DirEntry, error) {
	var (
		entries []fs.DirEntry
		err     error
	)
	if blocked := f.Batch(func(r *Reader) error {
		entries, err = r.ReadDir(name)
		return nil
	}); blocked != nil {
		return nil, blocked
	}
	return entries, err
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
// needed, up to limit bytes: a file beyond is a *TooLargeError, and the
// buffer grown for it is dropped for the caller's.
func readAll(fd int, buf []byte, kind fileKind, limit int) ([]byte, error) {
	given := buf[:0]
	buf = buf[:0]
	for {
		if len(buf) == cap(buf) {
			if len(buf) > limit {
				return given, &TooLargeError{Limit: limit}
			}
			// Never more than one byte beyond the limit, which tells a
			// file beyond it.
			buf = slices.Grow(buf, min(max(kind.grow, cap(buf)), limit+1-len(buf)))
		}
		n, err := retry(func() (int, error) {
			if kind.at0 {
				return syscall.Pread(fd, buf[len(buf):cap(buf)], int64(len(buf)))
			}
			return syscall.Read(fd, buf[len(buf):cap(buf)])
		})
		if err != nil {
			if cap(buf) > cap(given) {
				return given, err
			}
			return buf[:0], err
		}
		if n <= 0 {
			if len(buf) > limit {
				return given, &TooLargeError{Limit: limit}
			}
			return buf, nil
		}
		buf = buf[:len(buf)+n]
		if len(buf) > limit {
			return given, &TooLargeError{Limit: limit}
		}
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
