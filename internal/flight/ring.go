package flight

import (
	"bufio"
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

// A header block, then slots, record n in slot n mod slots:
// magic (2 bytes) | length (2) | number (8) | CRC-32C (4) | payload.
// A slot cut mid-write fails its CRC and is skipped; writing one slot never touches another.
const (
	headerSize = 4096
	// SlotSize: the largest record is about 330 bytes.
	SlotSize   = 512
	slotHeader = 16
	// MinSize: the header and 16 slots.
	MinSize   = headerSize + 16*SlotSize
	maxSize   = 1 << 30
	headerLen = 28
	minSlots  = (MinSize - headerSize) / SlotSize
	maxSlots  = (maxSize - headerSize) / SlotSize
)

var (
	fileMagic  = [8]byte{'S', 'P', 'K', 'F', 'L', 'T', '0', '1'}
	slotMagic  = [2]byte{'F', 'R'}
	castagnoli = crc32.MakeTable(crc32.Castagnoli)

	ErrLocked    = errors.New("another process (a second exporter?) holds the flight file")
	ErrNotFlight = errors.New("not a flight recorder file")
)

// writeFile is an *os.File, or a fault injector in tests.
type writeFile interface {
	io.WriterAt
	Sync() error
	Close() error
}

// Ring is not safe for concurrent use.
type Ring struct {
	f     writeFile
	slots uint64
	next  uint64
	buf   []byte
	read  slotFile
	boots []Boot
}

// Open locks the ring: a second writer gets ErrLocked. An existing file must be
// the exporter's own regular file, laid out afresh only if empty or a ring of
// another size; anything else is refused and left as it is.
func Open(path string, size uint64) (*Ring, error) {
	if size < MinSize || size > maxSize {
		return nil, fmt.Errorf("flight: size %d outside %d..%d", size, MinSize, maxSize)
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

// layOut writes the header first, so that a start cut short leaves a ring to lay
// out again; then allocates all, so that a full disk shows here and not at night.
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

// parseHeader: a ring never reads past maxSize.
func parseHeader(data []byte) (uint64, bool) {
	if len(data) < headerLen || [8]byte(data[:8]) != fileMagic ||
		crc32.Checksum(data[:24], castagnoli) != binary.LittleEndian.Uint32(data[24:]) ||
		binary.LittleEndian.Uint32(data[8:]) != 1 || binary.LittleEndian.Uint32(data[12:]) != SlotSize {
		return 0, false
	}
	slots := binary.LittleEndian.Uint64(data[16:])
	return slots, slots >= minSlots && slots <= maxSlots
}

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

// Append does not sync: the caller decides when.
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

func (r *Ring) Sync() error {
	if f, ok := r.f.(*os.File); ok {
		return syscall.Fdatasync(int(f.Fd()))
	}
	return r.f.Sync()
}

// Previous is the newest boot other than current when opened; nil if none.
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

func (r *Ring) Close() error { return r.f.Close() }

// Read takes no lock, as OpenFile.
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

// scan leaves out a slot holding a number that does not belong to it (n mod slots).
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
