package hostfs

import (
	"sync"
	"syscall"
)

// A collector reads the same value files on every scrape (meminfo, a
// sensor's input). Opening one was three quarters of its read's cost, so a
// holding FS keeps each such file open from one batch to the next and
// reads it again with pread: a seq_file or sysfs attribute read at offset 0
// is generated afresh, as on a new open. What a batch read it hands back;
// a held file it did not read is closed, so the set follows what is read.

// DescriptorShare is how many files one holder may keep open: the
// descriptor limit over share, and at most most (0 where the limit is
// unknown: hold none).
func DescriptorShare(share, most uint64) int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0
	}
	return int(min(lim.Cur/share, most))
}

// heldFiles are a holding FS's open files by name, taken by one batch at a
// time: a batch that finds them taken (one given up on still runs) opens
// its files afresh, and the second to hand its own back closes them.
type heldFiles struct {
	// checkLinks: the mount point is not procfs or sysfs but a tree of
	// plain files (a fixture), where a file removed or replaced reads on
	// through the descriptor held; the kernel's files fail with ENODEV.
	checkLinks bool
	max        int // far above a Spark's value files (about 45)
	mu         sync.Mutex
	files      map[string]int
	taken      bool
	closed     bool // by Close: batches open afresh and hold nothing
}

// Holding returns f keeping open, between batches, the files its batches
// read with ReadFile: for a collector's one batch of per-scrape reads.
func (f FS) Holding() FS {
	magic := f.magic()
	kernel := magic == procSuperMagic || magic == sysfsMagic
	f.held = &heldFiles{checkLinks: !kernel, max: DescriptorShare(16, 128)}
	return f
}

// IsProcfs tells whether the mount point is a procfs, not a tree of plain
// files: its net/ is this process's network namespace's.
func (f FS) IsProcfs() bool { return f.magic() == procSuperMagic }

// magic is the mount point's filesystem type, 0 if it cannot be told.
func (f FS) magic() int64 {
	var st syscall.Statfs_t
	if syscall.Statfs(f.root, &st) != nil {
		return 0
	}
	return int64(st.Type)
}

// The filesystems' magic numbers, from linux/magic.h.
const (
	procSuperMagic = 0x9fa0
	sysfsMagic     = 0x62656572
)

// Close closes the files f holds, for a collector's Close; f's batches
// hold nothing after it. Closing an FS that holds nothing does nothing.
func (f FS) Close() error {
	if f.held == nil {
		return nil
	}
	h := f.held
	h.mu.Lock()
	defer h.mu.Unlock()
	closeAll(h.files)
	h.files, h.closed = nil, true
	return nil
}

// take starts a batch: the files held, and where to put those it reads
// (nil: hold none).
func (h *heldFiles) take() (held, keep map[string]int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.closed:
		return nil, nil
	case h.taken:
		return nil, map[string]int{}
	}
	held = h.files
	h.files, h.taken = nil, true
	return held, map[string]int{}
}

// give takes back what a batch read, and closes what it did not.
func (h *heldFiles) give(kept, unread map[string]int) {
	closeAll(unread)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.taken && h.files == nil && !h.closed {
		h.files, h.taken = kept, false
		return
	}
	closeAll(kept)
}

func closeAll(files map[string]int) {
	for _, fd := range files {
		syscall.Close(fd)
	}
}

// readHeld reads name from the descriptor held for it, if any, and keeps
// the descriptor for the next batch. A held file that fails (a sysfs device
// removed: ENODEV) or was removed or replaced (in a tree of plain files) is
// closed, and ok is false: the caller opens it afresh.
func (r *Reader) readHeld(name string, buf []byte, kind fileKind) (data []byte, ok bool) {
	fd, held := r.held[name]
	if !held {
		return nil, false
	}
	delete(r.held, name)
	if r.fs.held.checkLinks {
		var st syscall.Stat_t
		if err := syscall.Fstat(fd, &st); err != nil || st.Nlink == 0 {
			syscall.Close(fd)
			return nil, false
		}
	}
	data, err := readAll(fd, buf, kind, r.fs.limitFor(name), true)
	if err != nil {
		syscall.Close(fd)
		return nil, false
	}
	r.keep[name] = fd
	return data, true
}

// hold keeps fd, just read whole, for the next batch; false when the FS
// holds nothing or holds its most, or fd is not a regular file (the
// kernel's value files are): a pipe cannot be read again from offset 0,
// and held open it would tell its writer a reader waits.
func (r *Reader) hold(name string, fd int) bool {
	if r.keep == nil || len(r.keep) >= r.fs.held.max {
		return false
	}
	if _, dup := r.keep[name]; dup || !regular(fd) {
		return false
	}
	r.keep[name] = fd
	return true
}

func regular(fd int) bool {
	var st syscall.Stat_t
	return syscall.Fstat(fd, &st) == nil && st.Mode&syscall.S_IFMT == syscall.S_IFREG
}
