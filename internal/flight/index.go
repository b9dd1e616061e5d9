package flight

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"slices"
	"time"
)

// Reading a ring of any size costs a fixed buffer and a bounded index; records
// are read again, slot by slot, for the one boot and span asked.
const (
	maxBoots   = 1024
	maxWindow  = 1 << 14
	readBuffer = 64 << 10
)

type slotFile struct {
	src io.ReaderAt
	n   uint64
}

type slotHead struct {
	n     uint64
	at    time.Time
	boot  [16]byte
	clean bool
}

// peek decodes no more than the number, time, boot and clean mark.
func (s slotFile) peek(slot []byte, i uint64) (h slotHead, ok, damaged bool) {
	if !slotOK(slot) {
		return h, false, !isEmpty(slot)
	}
	h.n = binary.LittleEndian.Uint64(slot[4:])
	payload := slot[slotHeader : slotHeader+int(binary.LittleEndian.Uint16(slot[2:]))]
	ms, k := binary.Varint(payload)
	if h.n%s.n != i%s.n || k <= 0 || len(payload) < k+17 {
		return h, false, false
	}
	copy(h.boot[:], payload[k:])
	h.at, h.clean = time.UnixMilli(ms), payload[k+16]&isClean != 0
	return h, true, false
}

// index reads every slot once; a short src reads up to its end.
func (s slotFile) index() (boots []Boot, next uint64, damaged int, err error) {
	in := bufio.NewReaderSize(io.NewSectionReader(s.src, headerSize, int64(s.n*SlotSize)), readBuffer)
	slot := make([]byte, SlotSize)
	for i := range s.n {
		if _, err = io.ReadFull(in, slot); err != nil {
			break
		}
		h, ok, bad := s.peek(slot, i)
		if bad {
			damaged++
		}
		if !ok {
			continue
		}
		next = max(next, h.n+1)
		// Slot order is number order but where the ring wrapped: a
		// number lower than the last starts a run of its own.
		if k := len(boots) - 1; k >= 0 && boots[k].ID == h.boot && h.n > boots[k].last {
			boots[k].Count++
			boots[k].last, boots[k].end, boots[k].clean = h.n, h.at, h.clean
		} else {
			boots = append(boots, Boot{ID: h.boot, Count: 1, first: h.n, last: h.n, end: h.at, clean: h.clean})
		}
		if len(boots) > 2*maxBoots {
			boots = newest(boots, maxBoots)
		}
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		err = nil
	}
	return merge(boots), next, damaged, err
}

func newest(boots []Boot, n int) []Boot {
	slices.SortFunc(boots, func(a, b Boot) int { return cmp.Compare(b.last, a.last) })
	return boots[:min(n, len(boots))]
}

// merge joins the parts of a boot the wrap cut.
func merge(runs []Boot) []Boot {
	runs = newest(runs, maxBoots)
	slices.SortFunc(runs, func(a, b Boot) int { return cmp.Compare(a.first, b.first) })
	var out []Boot
	for _, r := range runs {
		k := len(out) - 1
		if k < 0 || out[k].ID != r.ID {
			out = append(out, r)
			continue
		}
		b := &out[k]
		b.Count += r.Count
		if r.last > b.last {
			b.last, b.end, b.clean = r.last, r.end, r.clean
		}
	}
	return out
}

// each reads only b's slots; keep sees every record's time in order.
func (s slotFile) each(b Boot, keep func(time.Time) bool, fn func(Record)) error {
	lo := b.first
	if b.last-b.first >= s.n {
		lo = b.last - s.n + 1
	}
	count := b.last - lo + 1
	slot := make([]byte, SlotSize)
	var in *bufio.Reader
	for done := uint64(0); done < count; {
		i := (lo + done) % s.n
		run := min(s.n-i, count-done)
		sec := io.NewSectionReader(s.src, headerSize+int64(i)*SlotSize, int64(run)*SlotSize)
		if in == nil {
			in = bufio.NewReaderSize(sec, readBuffer)
		} else {
			in.Reset(sec)
		}
		for j := range run {
			if _, err := io.ReadFull(in, slot); err != nil {
				if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
					return nil
				}
				return err
			}
			h, ok, _ := s.peek(slot, i+j)
			if !ok || h.n != lo+done+j || h.boot != b.ID || !keep(h.at) {
				continue
			}
			if rec, err := decode(slot[slotHeader : slotHeader+int(binary.LittleEndian.Uint16(slot[2:]))]); err == nil {
				rec.N = h.n
				fn(rec)
			}
		}
		done += run
	}
	return nil
}

// window keeps at most maxWindow records, the newest.
func (s slotFile) window(b Boot, d time.Duration) ([]Record, error) {
	var recs []Record
	err := s.each(b, b.Since(d), func(r Record) {
		if len(recs) == 2*maxWindow {
			recs = append(recs[:0], recs[maxWindow:]...)
		}
		recs = append(recs, r)
	})
	return recs[max(0, len(recs)-maxWindow):], err
}

// File is a flight file open for reading, its records read on demand.
type File struct {
	f       *os.File
	slots   slotFile
	boots   []Boot
	damaged int
}

// OpenFile takes no lock: a running exporter's file reads as of now. Only a
// regular file is read, its header first, then no more than the header says.
func OpenFile(path string) (*File, error) {
	f, size, err := openRead(path)
	if err != nil {
		return nil, err
	}
	n, err := readHeader(f, size)
	if err != nil {
		f.Close()
		return nil, err
	}
	file := &File{f: f, slots: slotFile{f, n}}
	if file.boots, _, file.damaged, err = file.slots.index(); err != nil {
		f.Close()
		return nil, err
	}
	return file, nil
}

func (f *File) Boots() []Boot { return f.boots }

func (f *File) Damaged() int { return f.damaged }

func (f *File) Each(b Boot, keep func(time.Time) bool, fn func(Record)) error {
	return f.slots.each(b, keep, fn)
}

func (f *File) Close() error { return f.f.Close() }
