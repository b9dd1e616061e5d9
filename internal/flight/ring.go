package flight

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"sort"
	"syscall"
	"time"
)

// The file is a header block, then fixed-size slots, record n in slot
// n mod slots. Each slot is
//
//	magic (2 bytes) | payload length (2) | record number (8) | CRC-32C (4) | payload
//
// the CRC over the length, the number and the payload. A slot cut by a
// power cut or a kill mid-write, zeroed, or flipped fails its CRC and is
// skipped on read; every other slot still reads. Writing one slot never
// touches another.
const (
	headerSize = 4096
	// SlotSize holds the largest record encode writes (about 330 bytes:
	// MaxWorkloads and MaxXid bound it) with room to spare.
	SlotSize   = 512
	slotHeader = 16
	// MinSize is the smallest ring: the header and 16 slots.
	MinSize = headerSize + 16*SlotSize
	// MaxSize bounds the ring.
	MaxSize = 1 << 30
	// headerLen is the header's length in its block.
	headerLen = 28
	minSlots  = (MinSize - headerSize) / SlotSize
	maxSlots  = (MaxSize - headerSize) / SlotSize
)

var (
	fileMagic  = [8]byte{'S', 'P', 'K', 'F', 'L', 'T', '0', '1'}
	slotMagic  = [2]byte{'F', 'R'}
	castagnoli = crc32.MakeTable(crc32.Castagnoli)

	// ErrLocked is Open's error when another process writes the file.
	ErrLocked = errors.New("another process (a second exporter?) holds the flight file")
	// ErrNotFlight is the error for a file that is not a flight ring.
	ErrNotFlight = errors.New("not a flight recorder file")
)

// writeFile is what a Ring writes through: an *os.File, or a fault
// injector in tests.
type writeFile interface {
	io.WriterAt
	Sync() error
	Close() error
}

// Ring appends records to a flight file. It is not safe for concurrent use.
type Ring struct {
	f     writeFile
	slots uint64
	next  uint64
	buf   []byte
	// read and boots are what the file held when it was opened.
	read  slotFile
	boots []Boot
}

// Open opens the ring at path, of size bytes (rounded down to whole
// slots), and locks it: a second writer gets ErrLocked. Only a file Open
// creates (mode 0640) has its mode set; an existing file must be the
// exporter's own regular file, and is laid out afresh only if empty or a
// ring of another size: anything else is refused, left as it is (see
// openRing). What the file held is indexed (Previous reads it).
func Open(path string, size uint64) (*Ring, error) {
	if size < MinSize || size > MaxSize {
		return nil, fmt.Errorf("flight: size %d outside %d..%d", size, MinSize, MaxSize)
	}
	slots := (size - headerSize) / SlotSize
	size = headerSize + slots*SlotSize
	f, created, err := openRing(path)
	if err != nil {
		return nil, err
	}
	r, err := load(f, created, slots, size)
	if err != nil {
		f.Close()
		return nil, err
	}
	return r, nil
}

func load(f *os.File, created bool, slots, size uint64) (*Ring, error) {
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, ErrLocked
		}
		return nil, err
	}
	if created {
		// The mode asked at create, whatever the umask.
		if err := f.Chmod(0o640); err != nil {
			return nil, err
		}
	}
	r := &Ring{f: f, slots: slots, buf: make([]byte, SlotSize)}
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() > 0 {
		hs, err := readHeader(f, fi.Size())
		if errors.Is(err, ErrNotFlight) {
			return nil, fmt.Errorf("flight: the file holds %d bytes that are not a flight ring, left as they are (%w)", fi.Size(), err)
		}
		if err != nil {
			return nil, err
		}
		if hs == slots && uint64(fi.Size()) == size {
			r.read = slotFile{f, hs}
			r.boots, r.next, _, err = r.read.index()
			return r, err
		}
	}
	return r, layOut(f, slots, size)
}

// layOut lays a new ring over f (empty, or a ring of another size): the
// header first, so that a start cut short leaves a ring to lay out again,
// not a file Open refuses; then the whole ring is allocated, so that a
// full disk shows here and not at a write in the middle of the night.
func layOut(f *os.File, slots, size uint64) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	if _, err := f.WriteAt(header(slots), 0); err != nil {
		return err
	}
	if err := syscall.Fallocate(int(f.Fd()), 0, 0, int64(size)); err != nil {
		if !errors.Is(err, syscall.EOPNOTSUPP) {
			return err
		}
		if err := f.Truncate(int64(size)); err != nil {
			return err
		}
	}
	return f.Sync()
}

func header(slots uint64) []byte {
	h := make([]byte, 24, headerLen)
	copy(h, fileMagic[:])
	binary.LittleEndian.PutUint32(h[8:], 1)
	binary.LittleEndian.PutUint32(h[12:], SlotSize)
	binary.LittleEndian.PutUint64(h[16:], slots)
	return binary.LittleEndian.AppendUint32(h, crc32.Checksum(h, castagnoli))
}

// parseHeader returns the slot count of a valid header: one Open could
// have written, so that a ring never reads past MaxSize.
func parseHeader(data []byte) (uint64, bool) {
	if len(data) < headerLen || [8]byte(data[:8]) != fileMagic ||
		crc32.Checksum(data[:24], castagnoli) != binary.LittleEndian.Uint32(data[24:]) ||
		binary.LittleEndian.Uint32(data[8:]) != 1 || binary.LittleEndian.Uint32(data[12:]) != SlotSize {
		return 0, false
	}
	slots := binary.LittleEndian.Uint64(data[16:])
	return slots, slots >= minSlots && slots <= maxSlots
}

// readHeader reads and checks the header of a file of size bytes, before
// anything else is read.
func readHeader(f io.ReaderAt, size int64) (uint64, error) {
	if size < headerLen {
		return 0, ErrNotFlight
	}
	h := make([]byte, headerLen)
	if _, err := f.ReadAt(h, 0); err != nil {
		return 0, err
	}
	slots, ok := parseHeader(h)
	if !ok {
		return 0, ErrNotFlight
	}
	return slots, nil
}

// Append writes rec into the next slot. It does not sync: the caller
// decides when (Sync).
func (r *Ring) Append(rec Record) error {
	payload := encode(r.buf[slotHeader:slotHeader], rec)
	if len(payload) > SlotSize-slotHeader {
		return errors.New("flight: record larger than a slot")
	}
	clear(r.buf[slotHeader+len(payload):])
	slot := r.buf
	copy(slot, slotMagic[:])
	binary.LittleEndian.PutUint16(slot[2:], uint16(len(payload)))
	binary.LittleEndian.PutUint64(slot[4:], r.next)
	binary.LittleEndian.PutUint32(slot[12:], slotCRC(slot))
	off := int64(headerSize + (r.next%r.slots)*SlotSize)
	if _, err := r.f.WriteAt(slot, off); err != nil {
		return err
	}
	r.next++
	return nil
}

func slotCRC(slot []byte) uint32 {
	n := binary.LittleEndian.Uint16(slot[2:])
	crc := crc32.Update(0, castagnoli, slot[2:12])
	return crc32.Update(crc, castagnoli, slot[slotHeader:slotHeader+int(n)])
}

// Sync makes the records appended so far durable (fdatasync).
func (r *Ring) Sync() error {
	if f, ok := r.f.(*os.File); ok {
		return syscall.Fdatasync(int(f.Fd()))
	}
	return r.f.Sync()
}

// Previous is the newest boot the file held when opened other than
// current, with its records of window before its end; nil if none.
func (r *Ring) Previous(current [16]byte, window time.Duration) (*Boot, error) {
	for i := len(r.boots) - 1; i >= 0; i-- {
		if b := r.boots[i]; b.ID != current {
			var err error
			b.Records, err = r.read.window(b, window)
			return &b, err
		}
	}
	return nil, nil
}

// Close closes the file, releasing the lock.
func (r *Ring) Close() error { return r.f.Close() }

// Read reads every intact record of the flight file at path, oldest first,
// and how many slots held a damaged record. It takes no lock: a running
// exporter's file reads as of now. Only a regular file is read, its header
// first, then no more than the header says.
func Read(path string) ([]Record, int, error) {
	f, size, err := openRead(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	slots, err := readHeader(f, size)
	if err != nil {
		return nil, 0, err
	}
	recs, _, damaged, err := scan(io.NewSectionReader(f, headerSize, int64(slots*SlotSize)), slots)
	return recs, damaged, err
}

// Decode reads a flight file's bytes: its intact records, oldest first,
// and the count of damaged slots. Only a file that is not a flight file
// (its header wrong) is an error; a truncated file reads up to its end.
func Decode(data []byte) ([]Record, int, error) {
	slots, ok := parseHeader(data)
	if !ok || len(data) > MaxSize {
		return nil, 0, ErrNotFlight
	}
	recs, _, damaged, err := scan(bytes.NewReader(data[min(len(data), headerSize):]), slots)
	return recs, damaged, err
}

func isEmpty(slot []byte) bool {
	for _, b := range slot[:slotHeader] {
		if b != 0 {
			return false
		}
	}
	return true
}

func slotOK(slot []byte) bool {
	n := binary.LittleEndian.Uint16(slot[2:])
	return [2]byte(slot[:2]) == slotMagic && int(n) <= SlotSize-slotHeader &&
		slotCRC(slot) == binary.LittleEndian.Uint32(slot[12:])
}

// scan reads up to slots slots from body, one at a time, up to its end:
// the intact records ordered by number, the highest number read, and how
// many slots held a damaged record. A slot holding a number that does not
// belong to it (n mod slots) is left out too.
func scan(body io.Reader, slots uint64) ([]Record, uint64, int, error) {
	type numbered struct {
		n   uint64
		rec Record
	}
	var got []numbered
	damaged := 0
	in := bufio.NewReaderSize(body, 64<<10)
	slot := make([]byte, SlotSize)
	var err error
	for i := range slots {
		if _, err = io.ReadFull(in, slot); err != nil {
			break
		}
		if !slotOK(slot) {
			if !isEmpty(slot) {
				damaged++
			}
			continue
		}
		n := binary.LittleEndian.Uint64(slot[4:])
		if n%slots != i {
			continue
		}
		rec, bad := decode(slot[slotHeader : slotHeader+int(binary.LittleEndian.Uint16(slot[2:]))])
		if bad != nil {
			continue
		}
		got = append(got, numbered{n, rec})
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		err = nil
	}
	sort.Slice(got, func(i, j int) bool { return got[i].n < got[j].n })
	recs := make([]Record, len(got))
	var last uint64
	for i, g := range got {
		g.rec.N = g.n
		recs[i], last = g.rec, g.n
	}
	return recs, last, damaged, err
}
