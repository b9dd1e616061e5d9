package hostfs

import (
	"encoding/binary"
	"errors"
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
	// budget bounds the files kept open (keptDescriptors): each holds a
	// descriptor and, in the kernel, a page for procfs's buffer.
	budget *descriptorBudget
	// listing counts the lists: a kept file that a whole scan did not
	// read (its process exited, or no longer needs the file) is closed at
	// the next List.
	listing uint64

	// Kept for the next batch of RereadAll, unless a batch blocked.
	items []reread
	arena []byte
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
	return &Processes{fs: f, fd: -1, kept: map[keptKey]keptFile{}, budget: keptDescriptors}
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
			d.closeKept(key, f)
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
	if blocked := d.fs.workers.run(d.fs, func(r *Reader) error {
		if err = r.begin(".", "."); err != nil {
			fd = -1
			return nil
		}
		defer r.end()
		fd, err = retry(func() (int, error) {
			return syscall.Open(d.fs.root, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
		})
		if err != nil {
			return nil
		}
		for {
			n, readErr := retry(func() (int, error) { return syscall.ReadDirent(fd, buf) })
			if readErr != nil {
				err = readErr
				return nil
			}
			if n <= 0 {
				return nil
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
	dir := d.fd
	var (
		data []byte
		err  error
	)
	if blocked := d.fs.workers.run(d.fs, func(r *Reader) error {
		var fd int
		if fd, err = d.openIn(r, dir, rel); err != nil {
			data = buf[:0]
			return nil
		}
		data, err = r.readFd(fd, rel, rel, buf, taskFile, d.fs.limitFor(name))
		syscall.Close(fd)
		return nil
	}, nil); blocked != nil {
		return nil, blocked
	}
	if errors.Is(err, ErrBlocked) {
		return nil, err
	}
	return data, err
}

// Reread is Read for a file read again at every scan (a known process's
// stat, a workload's status): it is kept open from scan to scan, up to a
// bound on the files kept.
func (d *Processes) Reread(p Process, name string, buf []byte) ([]byte, error) {
	data, err := buf[:0], error(nil)
	if blocked := d.RereadAll([]Process{p}, name, func(_ int, b []byte, e error) error {
		data, err = append(data, b...), e
		return nil
	}); blocked != nil {
		return nil, blocked
	}
	if err != nil {
		return buf[:0], err
	}
	return data, nil
}

// reread is one file of a batch of RereadAll.
type reread struct {
	p   Process
	rel string
	slot
}

// maxArena bounds the buffer a Processes keeps for its batches: the stat
// files of a thousand processes are about 300 KiB.
const maxArena = 1 << 20

// RereadAll is Reread of the file name of each of ps, in one batch: one
// hand-off to a worker and one deadline for the lot, since the hand-off
// costs more than the pread. Once all are read, each is called in turn,
// in the caller's goroutine, with what was read of ps[i] (valid until it
// returns) or why not; an error it returns ends the calls and is
// RereadAll's. When a read blocks past the deadline, or a file's earlier
// read is still blocked, RereadAll fails with an *fs.PathError naming the
// file, whose Err is a *BlockedError, and each is not called: the files
// after it were not read. The batch holds at most the descriptor budget's
// files open at once, whatever the number of processes.
func (d *Processes) RereadAll(ps []Process, name string, each func(i int, data []byte, err error) error) error {
	items := d.takeKept(ps, name)
	arena := d.arena[:0]
	// The batch's until it has returned.
	d.items, d.arena = nil, nil
	at := func(i int) *slot { return &items[i].slot }
	// The worker may outlive the call, and the next List closes d.fd.
	dir, limit := d.fd, d.fs.limitFor(name)
	// stopped: a file of the batch is still blocked from an earlier one.
	var stopped error
	if blocked := d.fs.workers.run(d.fs, func(r *Reader) error {
		arena, stopped = d.readBatch(r, items, dir, limit, arena)
		return nil
	}, func() { closeSlots(len(items), at, d.budget) }); blocked != nil {
		// The worker has the descriptors and the buffer.
		return blocked
	}
	// The files not reached, after one still blocked or an error of
	// each, are kept as they were.
	err := deliver(len(items), at, arena, stopped, each, func(i int) { d.keep(&items[i], name) })
	if cap(arena) <= maxArena {
		d.arena = arena
	}
	d.items = items[:0]
	return err
}

// takeKept makes the batch's items, each with the file kept open for its
// process, if any, taken out of the kept files.
func (d *Processes) takeKept(ps []Process, name string) []reread {
	items := d.items[:0]
	for _, p := range ps {
		it := reread{p: p, rel: strconv.Itoa(p.PID) + "/" + name, slot: slot{fd: -1}}
		key := keptKey{p.PID, name}
		if f, ok := d.kept[key]; ok {
			delete(d.kept, key)
			it.fd = f.fd
			if f.ino != p.Ino {
				// Another process has the pid.
				it.release(d.budget)
			}
		}
		items = append(items, it)
	}
	return items
}

// readBatch reads the items, in the batch's worker, into arena; stopped is
// the error of a read that found its file still blocked, after which
// nothing more is read.
func (d *Processes) readBatch(r *Reader, items []reread, dir, limit int, arena []byte) (_ []byte, stopped error) {
	var scratch []byte
	for i := range items {
		it := &items[i]
		if it.fd >= 0 {
			data, err := r.readFd(it.fd, it.rel, it.rel, scratch, taskFile, limit)
			if errors.Is(err, ErrBlocked) {
				return arena, err
			}
			if err == nil {
				scratch = data
				arena = it.store(arena, data)
				continue
			}
			// ESRCH: the process exited, and its pid may already
			// name another, which opening the path again finds.
			it.release(d.budget)
		}
		fd, err := d.openIn(r, dir, it.rel)
		if errors.Is(err, ErrBlocked) {
			return arena, err
		}
		if err != nil {
			it.err = err
			continue
		}
		it.fd = fd
		data, err := r.readFd(fd, it.rel, it.rel, scratch, taskFile, limit)
		// Kept only if it can tell its process from the next at the pid.
		it.hold(d.budget, err == nil && it.p.Ino != 0)
		if errors.Is(err, ErrBlocked) {
			return arena, err
		}
		if err != nil {
			it.err = err
			continue
		}
		scratch = data
		arena = it.store(arena, data)
	}
	return arena, nil
}

// keep keeps the file of it open for the next scan: it holds a place in
// the budget (slot.hold) only if it may be kept.
func (d *Processes) keep(it *reread, name string) {
	if it.fd >= 0 {
		d.kept[keptKey{it.p.PID, name}] = keptFile{fd: it.fd, ino: it.p.Ino, listing: d.listing}
	}
}

// Close closes the tree's directory and the files kept open.
func (d *Processes) Close() error {
	for key, f := range d.kept {
		d.closeKept(key, f)
	}
	if d.fd >= 0 {
		syscall.Close(d.fd)
		d.fd = -1
	}
	return nil
}

// closeKept closes a kept file and gives its place in the budget back.
func (d *Processes) closeKept(key keptKey, f keptFile) {
	syscall.Close(f.fd)
	delete(d.kept, key)
	d.budget.give()
}

// openIn opens rel, "PID/NAME", relative to the tree's directory dir.
func (d *Processes) openIn(r *Reader, dir int, rel string) (int, error) {
	if dir < 0 {
		return -1, syscall.EBADF
	}
	if err := r.begin(rel, rel); err != nil {
		return -1, err
	}
	defer r.end()
	return retry(func() (int, error) { return syscall.Openat(dir, rel, openFlags, 0) })
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
