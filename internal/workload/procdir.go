package workload

import (
	"encoding/binary"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"syscall"

	"github.com/spark-exporter/spark_exporter/internal/procfile"
)

// procFiles is the /proc tree as a scan reads it: the list of processes,
// then a few small files of each. A scan reads it at every scrape, so the
// reading is made cheap (docs/performance.md).
type procFiles interface {
	// list appends every process found to ps, and starts a scan: the
	// reads that follow are of this listing's processes.
	list(ps []entry) ([]entry, error)
	// read reads the file name of process pid into buf[:0], grown as
	// needed, and returns what was read.
	read(pid int, name string, buf []byte) ([]byte, error)
	// reread is read for a file read again at every scan (a known
	// process's stat, a workload's status): the reader may keep it open
	// from scan to scan.
	reread(e entry, name string, buf []byte) ([]byte, error)
	// Close releases what the reader keeps open.
	Close() error
}

// entry is a process listed in /proc.
type entry struct {
	pid int
	// ino is the inode number of the process's directory, or 0 when it
	// is not known. procfs makes a new directory inode for every process
	// (a pid reused by a new process gets a new one), so an unchanged
	// inode tells that a pid still names the same process.
	ino uint64
}

// procDir reads a /proc tree with as few system calls as the kernel
// allows: the listing with getdents, then, per file, one openat relative to
// the tree's directory, one read into a buffer the caller reuses, and a
// close. os.ReadFile spends five more (fcntl twice, epoll_ctl, fstat, a
// second read) and four allocations on each file, which at every process on
// every scrape was most of a scan's cost.
//
// Files read at every scan are kept open from one scan to the next and read
// again with one pread at offset 0, which makes procfs write them afresh:
// one system call instead of three. An open /proc/PID file stays bound to
// its process — once the process exits, reads fail with ESRCH even if its
// pid is reused — so a kept file is never read for another process.
type procDir struct {
	path string
	fd   int // the tree's directory, open from one list to the next; -1 before
	buf  []byte

	kept map[keptKey]keptFile
	// maxKept bounds the files kept open: each holds a descriptor and,
	// in the kernel, a page for procfs's buffer.
	maxKept int
	// listing counts the lists: a kept file that a whole scan did not
	// read (its process exited, or no longer needs the file) is closed at
	// the next list.
	listing uint64
}

type keptKey struct {
	pid  int
	name string
}

type keptFile struct {
	fd int
	// ino is the process directory's inode when the file was opened: a
	// listing with another inode at the pid is another process (see entry).
	ino     uint64
	listing uint64 // the last listing whose scan read the file
}

func newProcDir(path string) *procDir {
	return &procDir{path: path, fd: -1, kept: map[keptKey]keptFile{}, maxKept: maxKeptFiles()}
}

// keptMemory is the kernel memory the kept files may hold: procfs keeps a
// page per open file for its buffer, so 1,024 files with 4 KiB pages and
// 64 with 64 KiB ones.
const keptMemory = 4 << 20

// maxKeptFiles is how many files a procDir keeps open: what keptMemory
// allows, and no more than a quarter of the descriptors the process may
// open, so that the exporter's listener and scrapes always have theirs.
func maxKeptFiles() int {
	n := keptMemory / os.Getpagesize()
	var limit syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &limit); err == nil && limit.Cur/4 < uint64(n) {
		n = int(limit.Cur / 4)
	}
	return n
}

func (d *procDir) list(ps []entry) ([]entry, error) {
	if d.fd >= 0 {
		syscall.Close(d.fd)
		d.fd = -1
	}
	for key, f := range d.kept {
		if f.listing != d.listing {
			syscall.Close(f.fd)
			delete(d.kept, key)
		}
	}
	d.listing++
	fd, err := procfile.Retry(func() (int, error) {
		return syscall.Open(d.path, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	})
	if err != nil {
		return ps, err
	}
	d.fd = fd
	if d.buf == nil {
		d.buf = make([]byte, 16<<10)
	}
	for {
		n, err := procfile.Retry(func() (int, error) { return syscall.ReadDirent(fd, d.buf) })
		if err != nil {
			return ps, err
		}
		if n <= 0 {
			return ps, nil
		}
		ps = appendPids(ps, d.buf[:n])
	}
}

func (d *procDir) read(pid int, name string, buf []byte) ([]byte, error) {
	fd, err := d.open(pid, name)
	if err != nil {
		return buf[:0], err
	}
	defer syscall.Close(fd)
	return readAt0(fd, buf)
}

func (d *procDir) reread(e entry, name string, buf []byte) ([]byte, error) {
	key := keptKey{e.pid, name}
	if f, ok := d.kept[key]; ok {
		if f.ino == e.ino {
			data, err := readAt0(f.fd, buf)
			if err == nil {
				f.listing = d.listing
				d.kept[key] = f
				return data, nil
			}
			// ESRCH: the process exited, and its pid may already
			// name another, which opening the path again finds.
		}
		syscall.Close(f.fd)
		delete(d.kept, key)
	}
	fd, err := d.open(e.pid, name)
	if err != nil {
		return buf[:0], err
	}
	buf, err = readAt0(fd, buf)
	if err != nil || e.ino == 0 || len(d.kept) >= d.maxKept {
		syscall.Close(fd)
		return buf, err
	}
	d.kept[key] = keptFile{fd: fd, ino: e.ino, listing: d.listing}
	return buf, nil
}

// Close closes the tree's directory and the files kept open.
func (d *procDir) Close() error {
	for key, f := range d.kept {
		syscall.Close(f.fd)
		delete(d.kept, key)
	}
	if d.fd >= 0 {
		syscall.Close(d.fd)
		d.fd = -1
	}
	return nil
}

func (d *procDir) open(pid int, name string) (int, error) {
	if d.fd < 0 {
		return -1, syscall.EBADF
	}
	return procfile.Retry(func() (int, error) {
		return syscall.Openat(d.fd, strconv.Itoa(pid)+"/"+name, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	})
}

// readAt0 reads the file open at fd from its start into buf[:0], grown as
// needed. procfs writes a task's file afresh for a read at offset 0.
func readAt0(fd int, buf []byte) ([]byte, error) {
	buf = buf[:0]
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, max(512, cap(buf)))
		}
		n, err := procfile.Retry(func() (int, error) { return syscall.Pread(fd, buf[len(buf):cap(buf)], int64(len(buf))) })
		if err != nil {
			return buf[:0], err
		}
		if n <= 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
		// A read that does not fill the buffer is the end of the file:
		// procfs writes a file whole (a task's seq_file, its command
		// line) unless the buffer is full, and a regular file (a test
		// tree) is short only at its end. Stopping there saves the
		// read that would return 0.
		if len(buf) < cap(buf) {
			return buf, nil
		}
	}
}

// appendPids appends the processes among the directory entries in buf,
// which getdents64 filled with linux_dirent64 records: inode number (8
// bytes), offset (8), record length (2), type (1), then the NUL-terminated
// name. A record that does not fit ends the parse: the kernel never writes
// one, and a parse that trusted it could run past the buffer.
func appendPids(ps []entry, buf []byte) []entry {
	const header = 19
	for len(buf) >= header {
		reclen := int(binary.NativeEndian.Uint16(buf[16:18]))
		if reclen < header || reclen > len(buf) {
			break
		}
		ino := binary.NativeEndian.Uint64(buf[0:8])
		name := buf[header:reclen]
		for i, c := range name {
			if c == 0 {
				name = name[:i]
				break
			}
		}
		if pid, ok := parsePid(name); ok {
			ps = append(ps, entry{pid: pid, ino: ino})
		}
		buf = buf[reclen:]
	}
	return ps
}

// parsePid reads a process directory's name: a positive decimal number
// without sign or leading zero (self, sys and meminfo are not processes).
func parsePid(name []byte) (int, bool) {
	if len(name) == 0 || len(name) > 10 || name[0] == '0' {
		return 0, false
	}
	pid := 0
	for _, c := range name {
		if c < '0' || c > '9' {
			return 0, false
		}
		pid = pid*10 + int(c-'0')
	}
	return pid, pid <= 1<<31-1
}

// fsFiles reads a /proc tree through an fs.FS: the tests' trees, whose
// reads they count or fail.
type fsFiles struct{ fsys fs.FS }

func (f fsFiles) list(ps []entry) ([]entry, error) {
	des, err := fs.ReadDir(f.fsys, ".")
	if err != nil {
		return ps, err
	}
	for _, de := range des {
		pid, ok := parsePid([]byte(de.Name()))
		if !ok {
			continue
		}
		e := entry{pid: pid}
		if info, err := de.Info(); err == nil {
			if st, ok := info.Sys().(*syscall.Stat_t); ok {
				e.ino = st.Ino
			}
		}
		ps = append(ps, e)
	}
	return ps, nil
}

func (f fsFiles) read(pid int, name string, buf []byte) ([]byte, error) {
	data, err := fs.ReadFile(f.fsys, strconv.Itoa(pid)+"/"+name)
	return append(buf[:0], data...), err
}

func (f fsFiles) reread(e entry, name string, buf []byte) ([]byte, error) {
	return f.read(e.pid, name, buf)
}

func (fsFiles) Close() error { return nil }
