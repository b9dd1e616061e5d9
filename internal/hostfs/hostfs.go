// Package hostfs reads the host's /proc and /sys at the mount point a flag
// names (--path.procfs, --path.sysfs): whole small files, bounded by their
// kind so that a link to /dev/zero is an error and not an out-of-memory,
// never through a symbolic link (one in a fixture tree could put any file
// in a label), and under a deadline (deadline.go).
package hostfs

import (
	"context"
	"errors"
	"fmt"
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
	root    string
	ctx     context.Context // a collector run's, else each batch waits timeout
	timeout time.Duration
	maxSize int // every file's bound when not 0, else limitFor's
	kind    fileKind
	stuck   *stuckReads
	held    *heldFiles // Holding's; nil: every read opens its file
}

// New returns the filesystem mounted at root.
func New(root string) FS {
	return FS{root: root, ctx: context.Background(), timeout: DefaultTimeout, kind: seqFile,
		stuck: &stuckReads{files: map[string]struct{}{}}}
}

// Sysfs returns f for sysfs attributes: at most a page each (4 KiB on x86,
// up to 64 KiB on arm64), written whole by one read.
func (f FS) Sysfs() FS {
	f.maxSize, f.kind = 64<<10, sysAttribute
	return f
}

// WithTimeout returns f with batches outside a collector run under timeout.
func (f FS) WithTimeout(timeout time.Duration) FS {
	if timeout > 0 {
		f.timeout = timeout
	}
	return f
}

// WithContext returns f with its reads bounded by ctx, a collector run's.
func (f FS) WithContext(ctx context.Context) FS {
	f.ctx = ctx
	return f
}

// limitFor bounds a file far above what a kernel writes, so that only a
// file that is not what its name says goes beyond.
func (f FS) limitFor(name string) int {
	if f.maxSize > 0 {
		return f.maxSize
	}
	switch path.Base(name) {
	case "cmdline":
		return 8 << 20 // the kernel caps arguments and environment at 6 MiB
	case "stat", "status", "statm", "comm":
		return 64 << 10
	}
	return 1 << 20
}

// TooLargeError is a file beyond the bound on its kind.
type TooLargeError struct{ Limit int }

func (e *TooLargeError) Error() string {
	if e.Limit >= 1<<20 {
		return fmt.Sprintf("larger than %d MiB, not a file of its kind", e.Limit>>20)
	}
	return fmt.Sprintf("larger than %d KiB, not a file of its kind", e.Limit>>10)
}

const (
	openFlags = syscall.O_RDONLY | syscall.O_CLOEXEC | syscall.O_NOFOLLOW
	atFDCWD   = -100 // Linux's AT_FDCWD, which package syscall does not export
)

// Path is the path on this host of name, relative to the mount point.
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

// ReadFile reads the file name into buf, whose contents it replaces, and
// returns it, grown if need be: a batch of one read. Errors are
// *fs.PathError, as os.ReadFile's. On error buf is returned emptied, but
// after a *BlockedError: the blocked read still owns it.
func (f FS) ReadFile(name string, buf []byte) ([]byte, error) {
	// Not the results: the batch may set these after a block returned.
	var data []byte
	var err error
	if blocked := f.Batch(func(r *Reader) error {
		data, err = r.ReadFile(name, buf)
		return nil
	}); blocked != nil {
		return nil, blocked
	}
	return data, err
}

// How a file is read to its end: procfs hands a seq_file (meminfo, vmstat)
// out a page a read, so only a read of 0 ends one; a task's file or a
// sysfs attribute is written whole, so a short read ends it, a read saved.
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
// limit bytes, from its start with pread when again, else from where the
// descriptor is; on error it returns buf emptied.
func readAll(fd int, buf []byte, kind fileKind, limit int, again bool) ([]byte, error) {
	buf, given := buf[:0], buf[:0]
	for {
		if len(buf) == cap(buf) {
			// One byte beyond the limit tells a file beyond it.
			buf = slices.Grow(buf, min(max(kind.grow, cap(buf)), limit+1-len(buf)))
		}
		n, err := retry(func() (int, error) {
			if again {
				return syscall.Pread(fd, buf[len(buf):cap(buf)], int64(len(buf)))
			}
			return syscall.Read(fd, buf[len(buf):cap(buf)])
		})
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
