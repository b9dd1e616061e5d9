package hostfs

import (
	"errors"
	"os"
	"sync"
	"syscall"
)

// slot is one file of a batch read (KeptFiles.ReadAll,
// Processes.RereadAll): the descriptor it is read through, and what was
// read of it, arena[start:end], or why not.
type slot struct {
	fd         int // kept open, or opened by the batch; -1 when not open
	start, end int
	err        error
}

// store appends data to the batch's arena as the slot's contents.
func (s *slot) store(arena, data []byte) []byte {
	s.start, arena = len(arena), append(arena, data...)
	s.end = len(arena)
	return arena
}

// release closes the slot's descriptor now, giving its place in the
// budget back: a file not to be kept is not held to the end of its batch,
// so that a batch of any size holds at most the budget's descriptors and
// the one it is reading.
func (s *slot) release(b *descriptorBudget) {
	if s.fd >= 0 {
		syscall.Close(s.fd)
		s.fd = -1
		b.give()
	}
}

// hold keeps the descriptor just opened for the slot until the batch ends
// (and, if the caller keeps it, from batch to batch) when keepable and the
// budget has room; otherwise it closes it at once.
func (s *slot) hold(b *descriptorBudget, keepable bool) {
	if keepable && b.take() {
		return
	}
	syscall.Close(s.fd)
	s.fd = -1
}

// descriptorBudget bounds the descriptors that the batch readers
// (Processes, KeptFiles) hold open between their reads, within a batch
// and from one batch to the next: every descriptor a slot holds has a
// place in it. A scan of any number of processes, or a layout of any
// number of sysfs files, then holds at most the budget and the one file
// it is reading, and the files beyond the budget are opened, read and
// closed each time (slower, never unreadable).
type descriptorBudget struct {
	mu        sync.Mutex
	held, max int
}

func newDescriptorBudget(max int) *descriptorBudget { return &descriptorBudget{max: max} }

// take takes a place, telling whether there was one.
func (b *descriptorBudget) take() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.held >= b.max {
		return false
	}
	b.held++
	return true
}

// give gives a place back.
func (b *descriptorBudget) give() {
	b.mu.Lock()
	b.held--
	b.mu.Unlock()
}

// keptDescriptors is the budget that every batch reader of the process
// shares: RLIMIT_NOFILE is the process's, whatever reader holds them.
var keptDescriptors = newDescriptorBudget(maxKeptFiles())

// keptMemory is the kernel memory the kept files may hold: procfs keeps a
// page per open file for its buffer, so 1,024 files with 4 KiB pages and
// 64 with 64 KiB ones.
const keptMemory = 4 << 20

// maxKeptFiles is how many files the batch readers keep open: what
// keptMemory allows, and no more than a quarter of the descriptors the
// process may open, so that the exporter's listener, its connections and
// the files read once (meminfo, a command line) always have theirs.
func maxKeptFiles() int {
	n := keptMemory / os.Getpagesize()
	var limit syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &limit); err == nil && limit.Cur/4 < uint64(n) {
		n = int(limit.Cur / 4)
	}
	return n
}

// OutOfDescriptors tells whether err is the process (EMFILE) or the
// system (ENFILE) out of file descriptors: unlike a file that refuses its
// reader, it says nothing of the file, and a scan that meets it has not
// seen what is there.
func OutOfDescriptors(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// closeSlots closes the descriptors of an abandoned batch's slots (its
// worker has them, and runs this once its job returns).
func closeSlots(n int, at func(i int) *slot, b *descriptorBudget) {
	for i := range n {
		at(i).release(b)
	}
}

// deliver calls each, in order, with what each of the n slots read (or
// why not) until one call fails or err (a file still blocked) is set, and
// keep for every slot, reached or not, so that its descriptor is kept or
// closed. It returns err or the failing call's error.
func deliver(n int, at func(i int) *slot, arena []byte, err error, each func(i int, data []byte, err error) error, keep func(i int)) error {
	for i := 0; i < n; i++ {
		if s := at(i); err == nil {
			if s.err != nil {
				err = each(i, arena[:0], s.err)
			} else {
				err = each(i, arena[s.start:s.end], nil)
			}
		}
		keep(i)
	}
	return err
}
