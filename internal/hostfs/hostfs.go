// Package hostfs reads the host's /proc and /sys at the mount point a flag
// names (--path.procfs, --path.sysfs): whole small files, bounded by their
// kind so that a link to /dev/zero is an error and not an out-of-memory,
// never through a symbolic link (procfs and sysfs files are never links;
// one in a fixture tree could put any file in a label), and under a
// deadline (deadline.go).
package hostfs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/redact"
)

// FS is a pseudo-filesystem mounted at a directory. Copies share the set
// of reads known to be stuck.
type FS struct {
	root string
	// ctx bounds the reads: a collector run's (WithContext), or none, and
	// then each batch waits at most timeout.
	ctx     context.Context
	timeout time.Duration
	// maxSize, when not 0, bounds every file; otherwise limitFor tells by
	// the file's name.
	maxSize int
	kind    fileKind
	stuck   *stuckReads
}

// New returns the filesystem mounted at root, read with DefaultTimeout.
func New(root string) FS {
	return FS{root: root, timeout: DefaultTimeout, kind: seqFile, stuck: &stuckReads{files: map[string]struct{}{}}}
}

// Sysfs returns f for sysfs attributes: each at most MaxSysAttribute, and
// written whole by one read (a sysfs show callback fills a page at once),
// so a short read is its end.
func (f FS) Sysfs() FS {
	f.maxSize, f.kind = MaxSysAttribute, sysAttribute
	return f
}

// WithTimeout returns f with batches outside a collector run under timeout
// (--path.read-timeout).
func (f FS) WithTimeout(timeout time.Duration) FS {
	if timeout > 0 {
		f.timeout = timeout
	}
	return f
}

// WithContext returns f with its reads bounded by ctx, a collector run's
// (RunContext): they wait at most until its deadline.
func (f FS) WithContext(ctx context.Context) FS {
	f.ctx = ctx
	return f
}

// MaxSysAttribute bounds a sysfs file: an attribute is at most a page (4
// KiB on x86, up to 64 KiB on arm64).
const MaxSysAttribute = 64 << 10

// Bounds far above what a kernel writes, so that only a file that is not
// what its name says goes beyond.
const (
	// A process's stat is about 300 bytes, status about 1.5 KiB.
	maxTaskFile = 64 << 10
	// The kernel caps a program's arguments and environment together at
	// 6 MiB (fs/exec.c, since Linux 4.13).
	maxCmdline = 8 << 20
	// meminfo, vmstat, pressure/memory, sys/kernel values.
	maxSeqFile = 1 << 20
)

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
	if e.Limit >= 1<<20 && e.Limit%(1<<20) == 0 {
		return fmt.Sprintf("larger than %d MiB, not a file of its kind", e.Limit>>20)
	}
	if e.Limit >= 1<<10 && e.Limit%(1<<10) == 0 {
		return fmt.Sprintf("larger than %d KiB, not a file of its kind", e.Limit>>10)
	}
	return fmt.Sprintf("larger than %d bytes, not a file of its kind", e.Limit)
}

const openFlags = syscall.O_RDONLY | syscall.O_CLOEXEC | syscall.O_NOFOLLOW

// Path is the path on this host of name, slash-separated and relative to
// the mount point.
func (f FS) Path(name string) string { return filepath.Join(f.root, filepath.FromSlash(name)) }

// CheckRoot tells whether the mount point is a directory, with an error
// that names no path.
func (f FS) CheckRoot() error {
	info, err := os.Stat(f.root)
	if err != nil {
		return redact.WithoutPath(err)
	}
	if !info.IsDir() {
		return errors.New("not a directory")
	}
	return nil
}

// WithoutPath is redact.WithoutPath, for the callers of hostfs that have
// not moved to it.
func WithoutPath(err error) error { return redact.WithoutPath(err) }

// ReadFile reads the file name into buf, whose contents it replaces, and
// returns it, grown if the file did not fit: a batch of one read. Errors
// are *fs.PathError, as os.ReadFile's. On error the buffer is returned
// empty for the caller to keep, except after a *BlockedError: the blocked
// read still owns it.
func (f FS) ReadFile(name string, buf []byte) ([]byte, error) {
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

// ReadDir lists the directory name, as os.ReadDir does: a batch of one.
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

// The ways a file is read to its end. procfs hands a seq_file (meminfo,
// vmstat: up to about 4 KiB) out a page a read, so only a read of 0 ends
// one; a task's file or a sysfs attribute is written whole unless the
// buffer is full, so a short read ends it, and saves a read per file.
var (
	seqFile      = fileKind{grow: 8 << 10}
	taskFile     = fileKind{grow: 512, shortIsEnd: true}
	sysAttribute = fileKind{grow: 4 << 10, shortIsEnd: true}
)

type fileKind struct {
	grow       int // what an empty buffer is first given
	shortIsEnd bool
}

// readAll reads the file open at fd into buf[:0], grown as needed, up to
// limit bytes; on error, beyond the limit (*TooLargeError) included, it
// returns the buffer given, emptied.
func readAll(fd int, buf []byte, kind fileKind, limit int) ([]byte, error) {
	given := buf[:0]
	buf = buf[:0]
	for {
		if len(buf) == cap(buf) {
			// One byte beyond the limit tells a file beyond it.
			buf = slices.Grow(buf, min(max(kind.grow, cap(buf)), limit+1-len(buf)))
		}
		n, err := retry(func() (int, error) { return syscall.Read(fd, buf[len(buf):cap(buf)]) })
		switch {
		case err != nil:
			return given, err
		case n <= 0:
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

// retry repeats a system call that a signal interrupted.
func retry(call func() (int, error)) (int, error) {
	for {
		n, err := call()
		if !errors.Is(err, syscall.EINTR) {
			return n, err
		}
	}
}

// OutOfDescriptors tells whether err is the process (EMFILE) or the system
// (ENFILE) out of file descriptors: unlike a file that refuses its reader,
// it says nothing of the file.
func OutOfDescriptors(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}
