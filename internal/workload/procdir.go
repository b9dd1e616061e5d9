package workload

import (
	"encoding/binary"
	"errors"
	"io/fs"
	"slices"
	"strconv"
	"syscall"
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
type procDir struct {
	path string
	fd   int // the tree's directory, open from one list to the next; -1 before
	buf  []byte
}

func newProcDir(path string) *procDir { return &procDir{path: path, fd: -1} }

func (d *procDir) list(ps []entry) ([]entry, error) {
	if d.fd >= 0 {
		syscall.Close(d.fd)
		d.fd = -1
	}
	fd, err := retry(func() (int, error) {
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
		n, err := retry(func() (int, error) { return syscall.ReadDirent(fd, d.buf) })
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
	if d.fd < 0 {
		return buf[:0], syscall.EBADF
	}
	fd, err := retry(func() (int, error) {
		return syscall.Openat(d.fd, strconv.Itoa(pid)+"/"+name, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	})
	if err != nil {
		return buf[:0], err
	}
	defer syscall.Close(fd)
	buf = buf[:0]
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, max(512, cap(buf)))
		}
		n, err := retry(func() (int, error) { return syscall.Read(fd, buf[len(buf):cap(buf)]) })
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

// retry repeats a system call that a signal interrupted.
func retry(call func() (int, error)) (int, error) {
	for {
		n, err := call()
		if !errors.Is(err, syscall.EINTR) {
			return n, err
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
