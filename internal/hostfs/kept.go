package hostfs

import (
	"errors"
	"io/fs"
	"syscall"
)

// KeptFiles reads files that are read again and again (the sysfs values a
// scrape reads) through descriptors kept open: one pread at offset 0 each,
// which makes sysfs and procfs write the file afresh, instead of an open,
// a read and a close. Reads are under the FS's deadline and bounds, in
// batches (ReadAll): one hand-off to a worker for all the files a scrape
// reads. A KeptFiles is for one goroutine at a time.
type KeptFiles struct {
	fs   FS
	kept map[string]int
	// budget bounds the files kept open (keptDescriptors).
	budget *descriptorBudget

	// Kept for the next batch of ReadAll, unless a batch blocked.
	items []keptRead
	arena []byte
}

// keptRead is one file of a batch of ReadAll.
type keptRead struct {
	name string
	slot
}

// KeptFiles returns a reader that keeps the files it reads open. Close it
// to release them.
func (f FS) KeptFiles() *KeptFiles {
	return &KeptFiles{fs: f, kept: map[string]int{}, budget: keptDescriptors}
}

// Read reads the file name into buf[:0], grown as needed: ReadAll of one
// file. A read that blocks past the deadline returns nil.
func (k *KeptFiles) Read(name string, buf []byte) ([]byte, error) {
	data, err := buf[:0], error(nil)
	if blocked := k.ReadAll([]string{name}, func(_ int, b []byte, e error) error {
		data, err = append(data, b...), e
		return nil
	}); blocked != nil {
		return nil, blocked
	}
	return data, err
}

// ReadAll reads each of the files names in one batch: one hand-off to a
// worker and one deadline for the lot, since the hand-off costs more than
// the preads. A file is opened on first use and kept open; one that failed
// is opened afresh next time (it may have been replaced). Once all are
// read, each is called in turn, in the caller's goroutine, with what was
// read of names[i] (valid until it returns) or why not, an *fs.PathError
// naming the file relative to the mount point; an error it returns ends
// the calls and is ReadAll's. When a read blocks past the deadline, or a
// file's earlier read is still blocked, ReadAll fails with an
// *fs.PathError naming the file, whose Err is a *BlockedError, and each is
// not called: the files after it were not read.
func (k *KeptFiles) ReadAll(names []string, each func(i int, data []byte, err error) error) error {
	items := k.takeKept(names)
	arena := k.arena[:0]
	// The batch's until it has returned.
	k.items, k.arena = nil, nil
	at := func(i int) *slot { return &items[i].slot }
	// stopped: a file of the batch is still blocked from an earlier one.
	var stopped error
	if blocked := k.fs.workers.run(k.fs, func(r *Reader) error {
		arena, stopped = k.readBatch(r, items, arena)
		return nil
	}, func() { closeSlots(len(items), at, k.budget) }); blocked != nil {
		// The worker has the descriptors and the buffer.
		return blocked
	}
	// The files not reached, after one still blocked or an error of
	// each, are kept as they were.
	err := deliver(len(items), at, arena, stopped, each, func(i int) { k.keep(&items[i]) })
	if cap(arena) <= maxArena {
		k.arena = arena
	}
	k.items = items[:0]
	return err
}

// takeKept makes the batch's items, each with its file's kept descriptor,
// if any, taken out of the kept files.
func (k *KeptFiles) takeKept(names []string) []keptRead {
	items := k.items[:0]
	for _, name := range names {
		it := keptRead{name: name, slot: slot{fd: -1}}
		if !fs.ValidPath(name) {
			it.err = &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
		} else if fd, ok := k.kept[name]; ok {
			delete(k.kept, name)
			it.fd = fd
		}
		items = append(items, it)
	}
	return items
}

// readBatch reads the items, in the batch's worker, into arena; stopped is
// the error of a read that found its file still blocked, after which
// nothing more is read.
func (k *KeptFiles) readBatch(r *Reader, items []keptRead, arena []byte) (_ []byte, stopped error) {
	var scratch []byte
	for i := range items {
		it := &items[i]
		if it.err != nil {
			continue
		}
		fd, opened := it.fd, false
		if fd < 0 {
			var err error
			fd, err = r.openAt(-1, it.name, it.name)
			if errors.Is(err, ErrBlocked) {
				return arena, err
			}
			if err != nil {
				it.err = &fs.PathError{Op: "open", Path: it.name, Err: err}
				continue
			}
			it.fd, opened = fd, true
		}
		data, err := r.readFd(fd, it.name, it.name, scratch, taskFile, k.fs.limitFor(it.name))
		switch {
		case opened:
			// A file that failed is opened afresh next time: it may have
			// been replaced.
			it.hold(k.budget, err == nil)
		case err != nil:
			it.release(k.budget)
		}
		if errors.Is(err, ErrBlocked) {
			return arena, err
		}
		if err != nil {
			it.err = &fs.PathError{Op: "read", Path: it.name, Err: err}
			continue
		}
		scratch = data
		arena = it.store(arena, data)
	}
	return arena, nil
}

// keep keeps the file of it open for the next batch: it holds a place in
// the budget (slot.hold) only if it may be kept. A name given twice in a
// batch is kept once.
func (k *KeptFiles) keep(it *keptRead) {
	if it.fd < 0 {
		return
	}
	if _, dup := k.kept[it.name]; dup {
		it.release(k.budget)
		return
	}
	k.kept[it.name] = it.fd
}

// Close closes the files kept open.
func (k *KeptFiles) Close() error {
	for name, fd := range k.kept {
		syscall.Close(fd)
		delete(k.kept, name)
		k.budget.give()
	}
	return nil
}
