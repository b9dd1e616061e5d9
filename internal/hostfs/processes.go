package hostfs

import (
	"encoding/binary"
	"errors"
	"slices"
	"strconv"
	"syscall"
)

// Process is a process listed in /proc.
type Process struct {
	PID int
	// Ino is the inode number of the process's directory, 0 when not
	// known. procfs makes a new inode for every process, so an unchanged
	// inode tells that a pid still names the same process.
	Ino uint64
}

// Processes reads the per-process files of a /proc tree: the listing with
// getdents (which gives each directory's inode, where os.ReadDir would
// need a stat per process), then each file with an openat relative to the
// tree's directory, reads into the caller's buffer, and a close. Errors
// name the file relative to the mount point. A Processes is for one
// goroutine at a time.
type Processes struct {
	fs FS
	fd int // the tree's directory, open from one List to the next; -1 before

	// What the last RereadAll read, kept for the next.
	arena []byte
	reads []span
}

// span is one file of a RereadAll: arena[start:end], or why not.
type span struct {
	start, end int
	err        error
}

// Processes returns a reader of the process directories under the mount
// point. Close it to release the tree's directory.
func (f FS) Processes() *Processes { return &Processes{fs: f, fd: -1} }

// List appends every process found to ps; the reads that follow are of
// this listing's tree.
func (d *Processes) List(ps []Process) ([]Process, error) {
	d.Close()
	var (
		fd  = -1
		err error
	)
	if blocked := d.fs.Batch(func(r *Reader) error {
		if err = r.begin(".", "."); err != nil {
			return nil
		}
		defer r.end()
		if fd, err = retry(func() (int, error) {
			return syscall.Open(d.fs.root, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
		}); err != nil {
			return nil
		}
		buf := make([]byte, 16<<10)
		for {
			n, readErr := retry(func() (int, error) { return syscall.ReadDirent(fd, buf) })
			if readErr != nil || n <= 0 {
				err = readErr
				return nil
			}
			ps = appendPids(ps, buf[:n])
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

// Read reads the file name of process pid into buf[:0], grown as needed. A
// read that blocks past the deadline fails with an *fs.PathError naming
// the file ("1234/cmdline") whose Err is a *BlockedError, and returns nil:
// the buffer is still being written to.
func (d *Processes) Read(pid int, name string, buf []byte) ([]byte, error) {
	var (
		data []byte
		err  error
	)
	// The batch may outlive the call, and the next List closes d.fd.
	dir := d.fd
	if blocked := d.fs.Batch(func(r *Reader) error {
		data, err = d.read(r, dir, strconv.Itoa(pid)+"/"+name, buf)
		return nil
	}); blocked != nil {
		return nil, blocked
	}
	if errors.Is(err, ErrBlocked) {
		return nil, err
	}
	return data, err
}

func (d *Processes) read(r *Reader, dir int, rel string, buf []byte) ([]byte, error) {
	if dir < 0 {
		return buf[:0], syscall.EBADF
	}
	return r.readAt(dir, rel, buf, d.fs.limitFor(rel))
}

// Reread is Read for a file read at every scan (a known process's stat).
// The process's inode is not used: a file kept open from scan to scan
// paid less than 5 % of a scrape.
func (d *Processes) Reread(p Process, name string, buf []byte) ([]byte, error) {
	return d.Read(p.PID, name, buf)
}

// RereadAll reads the file name of each of ps in one batch, one deadline
// for the lot; then each is called in turn, in the caller's goroutine,
// with what was read of ps[i] (valid until it returns) or why not. An
// error each returns ends the calls and is RereadAll's. When a read
// blocks, RereadAll fails naming the file, and each is not called.
func (d *Processes) RereadAll(ps []Process, name string, each func(i int, data []byte, err error) error) error {
	arena, reads := d.arena[:0], d.reads[:0]
	// The batch's until it has returned.
	d.arena, d.reads = nil, nil
	var stopped error
	// The batch may outlive the call: its own copies.
	dir, ps := d.fd, slices.Clone(ps)
	if blocked := d.fs.Batch(func(r *Reader) error {
		var buf []byte
		for _, p := range ps {
			data, err := d.read(r, dir, strconv.Itoa(p.PID)+"/"+name, buf)
			if errors.Is(err, ErrBlocked) {
				stopped = err
				return nil
			}
			buf = data
			start := len(arena)
			arena = append(arena, data...)
			reads = append(reads, span{start, len(arena), err})
		}
		return nil
	}); blocked != nil {
		return blocked
	}
	if stopped != nil {
		return stopped
	}
	for i, s := range reads {
		if err := each(i, arena[s.start:s.end], s.err); err != nil {
			return err
		}
	}
	if cap(arena) <= 1<<20 { // a thousand stat files are about 300 KiB
		d.arena, d.reads = arena, reads
	}
	return nil
}

// Close closes the tree's directory.
func (d *Processes) Close() error {
	if d.fd >= 0 {
		syscall.Close(d.fd)
		d.fd = -1
	}
	return nil
}

// appendPids appends the processes among the linux_dirent64 records in
// buf: inode (8 bytes), offset (8), record length (2), type (1), then the
// NUL-terminated name. A record that does not fit ends the parse.
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
