package hostfs

import (
	"encoding/binary"
	"io/fs"
	"os"
	"strconv"
	"syscall"
)

// Process is a process listed in /proc.
type Process struct {
	PID int
	// Ino is the inode number of the process's directory, or 0 when it
	// is not known. procfs makes a new directory inode for every process
	// (a pid reused by a new process gets a new one), so an unchanged
	// inode tells that a pid still names the same process.
	Ino uint64
}

// Processes reads the per-process files of a /proc tree with as few system
// calls as the kernel allows: the listing with getdents, then, per file,
// one openat relative to the tree's directory, one read into a buffer the
// caller reuses, and a close. os.ReadFile spends five more (fcntl twice,
// epoll_ctl, fstat, a second read) and four allocations on each file, which
// at every process on every scrape was most of a workloads scan's cost.
//
// Files read at every scan (Reread) are kept open from one scan to the next
// and read again with one pread at offset 0, which makes procfs write them
// afresh: one system call instead of three. An open /proc/PID file stays
// bound to its process — once the process exits, reads fail with ESRCH even
// if its pid is reused — so a kept file is never read for another process.
//
// Errors name no path. A Processes is for one goroutine at a time.
type Processes struct {
	fs FS
	fd int // the tree's directory, open from one List to the next; -1 before

	kept map[keptKey]keptFile
	// maxKept bounds the files kept open: each holds a descriptor and,
	// in the kernel, a page for procfs's buffer.
	maxKept int
	// listing counts the lists: a kept file that a whole scan did not
	// read (its process exited, or no longer needs the file) is closed at
	// the next List.
	listing uint64
}

type keptKey struct {
	pid  int
	name string
}

type keptFile struct {
	fd int
	// ino is the process directory's inode when the file was opened: a
	// listing with another inode at the pid is another process (see
	// Process).
	ino     uint64
	listing uint64 // the last listing whose scan read the file
}

// Processes returns a reader of the process directories under the mount
// point. Close it to release the files it keeps open.
func (f FS) Processes() *Processes {
	return &Processes{fs: f, fd: -1, kept: map[keptKey]keptFile{}, maxKept: maxKeptFiles()}
}

// keptMemory is the kernel memory the kept files may hold: procfs keeps a
// page per open file for its buffer, so 1,024 files with 4 KiB pages and
// 64 with 64 KiB ones.
const keptMemory = 4 << 20

// maxKeptFiles is how many files a Processes keeps open: what keptMemory
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

// List appends every process found to ps, and starts a scan: the reads
// that follow are of this listing's processes, and the kept files the last
// scan did not read are closed.
func (d *Processes) List(ps []Process) ([]Process, error) {
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
	var (
		fd  int
		err error
	)
	// A buffer for each listing: one kept from listing to listing paid
	// nothing measurable in the whole-scrape benchmark.
	buf := make([]byte, 16<<10)
	if blocked := d.fs.workers.run(".", d.fs.timeout, func() {
		fd, err = retry(func() (int, error) {
			return syscall.Open(d.fs.root, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
		})
		if err != nil {
			return
		}
		for {
			n, readErr := retry(func() (int, error) { return syscall.ReadDirent(fd, buf) })
			if readErr != nil {
				err = readErr
				return
			}
			if n <= 0 {
				return
			}
			ps = appendPids(ps, buf[:n])
		}
	}, func() {
		if err == nil {
			syscall.Close(fd)
		}
	}); blocked != nil {
		return nil, blocked
	}
	if err != nil {
		if fd >= 0 {
			syscall.Close(fd)
		}
		return ps, err
	}
	d.fd = fd
	return ps, nil
}

// Read reads the file name of process pid into buf[:0], grown as needed,
// and returns what was read. A read that blocks past the deadline fails
// with an *fs.PathError naming the file relative to the mount point
// ("1234/cmdline") whose Err is a *BlockedError, and returns nil: the
// buffer is still being written to.
func (d *Processes) Read(pid int, name string, buf []byte) ([]byte, error) {
	rel := strconv.Itoa(pid) + "/" + name
	var (
		data []byte
		err  error
	)
	if blocked := d.fs.workers.run(rel, d.fs.timeout, func() {
		var fd int
		if fd, err = d.open(rel); err != nil {
			data = buf[:0]
			return
		}
		data, err = readAll(fd, buf, taskFile, d.fs.limitFor(name))
		syscall.Close(fd)
	}, nil); blocked != nil {
		return nil, &fs.PathError{Op: "read", Path: rel, Err: blocked}
	}
	return data, err
}

// Reread is Read for a file read again at every scan (a known process's
// stat, a workload's status): it is kept open from scan to scan, up to a
// bound on the files kept.
func (d *Processes) Reread(p Process, name string, buf []byte) ([]byte, error) {
	key := keptKey{p.PID, name}
	rel := strconv.Itoa(p.PID) + "/" + name
	limit := d.fs.limitFor(name)
	if f, ok := d.kept[key]; ok {
		delete(d.kept, key)
		if f.ino == p.Ino {
			var (
				data []byte
				err  error
			)
			if blocked := d.fs.workers.run(rel, d.fs.timeout, func() {
				data, err = readAll(f.fd, buf, taskFile, limit)
			}, func() { syscall.Close(f.fd) }); blocked != nil {
				return nil, &fs.PathError{Op: "read", Path: rel, Err: blocked}
			}
			if err == nil {
				f.listing = d.listing
				d.kept[key] = f
				return data, nil
			}
			// ESRCH: the process exited, and its pid may already
			// name another, which opening the path again finds.
		}
		syscall.Close(f.fd)
	}
	var (
		fd   = -1
		data []byte
		err  error
	)
	if blocked := d.fs.workers.run(rel, d.fs.timeout, func() {
		if fd, err = d.open(rel); err != nil {
			data = buf[:0]
			return
		}
		data, err = readAll(fd, buf, taskFile, limit)
	}, func() {
		if fd >= 0 {
			syscall.Close(fd)
		}
	}); blocked != nil {
		return nil, &fs.PathError{Op: "read", Path: rel, Err: blocked}
	}
	if fd < 0 {
		return data, err
	}
	if err != nil || p.Ino == 0 || len(d.kept) >= d.maxKept {
		syscall.Close(fd)
		return data, err
	}
	d.kept[key] = keptFile{fd: fd, ino: p.Ino, listing: d.listing}
	return data, nil
}

// Close closes the tree's directory and the files kept open.
func (d *Processes) Close() error {
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

// open opens rel, "PID/NAME", relative to the tree's directory.
func (d *Processes) open(rel string) (int, error) {
	if d.fd < 0 {
		return -1, syscall.EBADF
	}
	fd, err := retry(func() (int, error) { return syscall.Openat(d.fd, rel, openFlags, 0) })
	if err != nil {
		return -1, err
	}
	return fd, nil
}

// appendPids appends the processes among the directory entries in buf,
// which getdents64 filled with linux_dirent64 records: inode number (8
// bytes), offset (8), record length (2), type (1), then the NUL-terminated
// name. A record that does not fit ends the parse: the kernel never writes
// one, and a parse that trusted it could run past the buffer.
func appendPids(ps []Process, buf []byte) []Process {
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
		if pid, ok := parsePID(name); ok {
			ps = append(ps, Process{PID: pid, Ino: ino})
		}
		buf = buf[reclen:]
	}
	return ps
}

// parsePID reads a process directory's name: a positive decimal number
// without sign or leading zero (self, sys and meminfo are not processes).
func parsePID(name []byte) (int, bool) {
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
