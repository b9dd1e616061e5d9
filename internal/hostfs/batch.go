package hostfs

import "syscall"

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

// closeSlot closes the slot's descriptor, for a batch abandoned at its
// deadline: its worker has the descriptors.
func closeSlot(s *slot) {
	if s.fd >= 0 {
		syscall.Close(s.fd)
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
