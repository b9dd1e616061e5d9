package flight

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func u64(v uint64) *uint64 { return &v }

var boot1 = [16]byte{1, 2, 3}

func sample(i int) Record {
	return Record{
		Time: time.UnixMilli(1_700_000_000_000 + int64(i)*5000), Boot: boot1,
		Pool:     &Pool{Free: uint64(i) << 20, Available: 100<<30 - uint64(i)<<28, Cache: 7 << 30, CMAFree: u64(1 << 30), Usable: u64(99<<30 - uint64(i)<<28)},
		Pressure: &Pressure{Some: uint64(i) * 1000, Full: u64(uint64(i) * 10)},
		GPU:      &GPU{TemperatureCelsius: 71, PowerWatts: 98.5, SMClockHertz: 2.4e9, State: "warming"},
		Kernel:   &Kernel{DriverOutOfMemory: uint64(i / 10), Xid: []XidCount{{79, 1}, {13, 2}}},
		Workloads: []Workload{{Role: "inference", Kind: "vllm", ResidentBytes: 80 << 30},
			{Role: "training", Kind: "axolotl", ResidentBytes: uint64(i) << 24}},
	}
}

func open(t *testing.T, path string, size uint64) *Ring {
	t.Helper()
	r, err := Open(path, size)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Records read back as written, in order, across a reopen that continues
// the numbering; the file is mode 0640.
func TestRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "flight")
	r := open(t, path, MinSize)
	for i := range 5 {
		if err := r.Append(sample(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Sync(); err != nil {
		t.Fatal(err)
	}
	r.Close()
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v (%v), want 0640", fi.Mode().Perm(), err)
	}
	r = open(t, path, MinSize)
	if len(r.boots) != 1 || r.boots[0].Count != 5 {
		t.Fatalf("reopened with %+v, want one boot of 5 records", r.boots)
	}
	r.Append(sample(5))
	r.Close()
	recs, damaged, err := Read(path)
	if err != nil || damaged != 0 || len(recs) != 6 {
		t.Fatalf("Read: %d records, %d damaged, %v", len(recs), damaged, err)
	}
	for i, rec := range recs {
		want := sample(i)
		want.N = uint64(i)
		if !reflect.DeepEqual(rec, want) {
			t.Errorf("record %d:\n got %+v\nwant %+v", i, rec, want)
		}
	}
}

// A ring that wrapped many times reads its last slots' worth, in order.
func TestWrapReadsInOrder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "flight")
	r := open(t, path, MinSize)
	for i := range 1000 {
		if err := r.Append(sample(i)); err != nil {
			t.Fatal(err)
		}
	}
	r.Close()
	recs, _, err := Read(path)
	if err != nil || len(recs) != 16 {
		t.Fatalf("%d records, %v; want 16", len(recs), err)
	}
	for i, rec := range recs {
		if rec.N != uint64(984+i) || !rec.Time.Equal(sample(984+i).Time) {
			t.Errorf("record %d is number %d at %v", i, rec.N, rec.Time)
		}
	}
}

// A torn, a zeroed and a bit-flipped slot are skipped; the others read,
// and a truncated file reads up to its end.
func TestDamagedSlotsSkipped(t *testing.T) {
	path := filepath.Join(t.TempDir(), "flight")
	r := open(t, path, MinSize)
	for i := range 10 {
		r.Append(sample(i))
	}
	r.Close()
	data, _ := os.ReadFile(path)
	slot := func(i int) []byte { return data[headerSize+i*SlotSize : headerSize+(i+1)*SlotSize] }
	clear(slot(2)[100:]) // torn: the second half never written
	clear(slot(4))       // zeroed
	slot(6)[40] ^= 0x10  // one bit flipped
	recs, damaged, err := decodeRing(data)
	if err != nil || len(recs) != 7 || damaged != 2 {
		t.Errorf("%d records, %d damaged (%v); want 7 and 2 (the zeroed slot is empty)", len(recs), damaged, err)
	}
	recs, _, err = decodeRing(data[:headerSize+5*SlotSize+100])
	if err != nil || len(recs) != 3 {
		t.Errorf("truncated: %d records (%v), want 3", len(recs), err)
	}
	if _, _, err := decodeRing(make([]byte, 8192)); !errors.Is(err, ErrNotFlight) {
		t.Errorf("zeroed file: %v, want ErrNotFlight", err)
	}
}

// A second writer on the same file is refused; the first keeps writing.
func TestSecondWriterRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "flight")
	r := open(t, path, MinSize)
	defer r.Close()
	if _, err := Open(path, MinSize); !errors.Is(err, ErrLocked) {
		t.Errorf("second Open: %v, want ErrLocked", err)
	}
	if err := r.Append(sample(0)); err != nil {
		t.Errorf("first writer after the refusal: %v", err)
	}
}

func TestReadOnlyDirectory(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root writes into a read-only directory")
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o500)
	defer os.Chmod(dir, 0o700)
	if _, err := Open(filepath.Join(dir, "flight"), MinSize); err == nil {
		t.Error("Open in a read-only directory succeeded")
	}
}

type fullDisk struct{}

func (fullDisk) WriteAt([]byte, int64) (int, error) { return 0, syscall.ENOSPC }
func (fullDisk) Sync() error                        { return syscall.ENOSPC }
func (fullDisk) Close() error                       { return nil }

// A full disk fails the write with its error and numbers nothing.
func TestFullDisk(t *testing.T) {
	r := &Ring{f: fullDisk{}, slots: 16, buf: make([]byte, SlotSize)}
	if err := r.Append(sample(0)); !errors.Is(err, syscall.ENOSPC) || r.next != 0 {
		t.Errorf("Append on a full disk: %v, next %d", err, r.next)
	}
}

func TestSizeBounds(t *testing.T) {
	for _, size := range []uint64{0, MinSize - 1, maxSize + 1} {
		if _, err := Open(filepath.Join(t.TempDir(), "f"), size); err == nil {
			t.Errorf("size %d accepted", size)
		}
	}
}

// zeroDevice is a copy of /dev/zero (char 1,5) made with mknod.
func zeroDevice(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mknod(path, syscall.S_IFCHR|0o666, 1<<8|5); err != nil {
		t.Skipf("mknod: %v (needs CAP_MKNOD)", err)
	}
}

// Open changes no file it did not make: each is refused, saying what it
// found, and keeps its bytes and mode.
func TestOpenLeavesOtherFilesAlone(t *testing.T) {
	text := []byte(strings.Repeat("not a ring\n", 1000))
	cases := []struct {
		name, want string
		setup      func(t *testing.T, dir string) (path, watched string)
	}{
		{"text file", "11000 bytes that are not a flight ring", func(t *testing.T, dir string) (string, string) {
			path := filepath.Join(dir, "notes")
			os.WriteFile(path, text, 0o644)
			return path, path
		}},
		{"char device", "a character device, not a regular file", func(t *testing.T, dir string) (string, string) {
			path := filepath.Join(dir, "zero")
			zeroDevice(t, path)
			return path, path
		}},
		{"FIFO", "a named pipe, not a regular file", func(t *testing.T, dir string) (string, string) {
			path := filepath.Join(dir, "fifo")
			syscall.Mkfifo(path, 0o644)
			return path, path
		}},
		{"symbolic link", "a symbolic link, not followed", func(t *testing.T, dir string) (string, string) {
			target := filepath.Join(dir, "target")
			os.WriteFile(target, text, 0o600)
			os.Symlink(target, filepath.Join(dir, "link"))
			return filepath.Join(dir, "link"), target
		}},
		{"hard link", "other names (hard links)", func(t *testing.T, dir string) (string, string) {
			target := filepath.Join(dir, "target")
			os.WriteFile(target, nil, 0o600)
			os.Link(target, filepath.Join(dir, "link"))
			return filepath.Join(dir, "link"), target
		}},
		{"another user's link in the path", "a symbolic link in its path that another user owns", func(t *testing.T, dir string) (string, string) {
			if os.Geteuid() != 0 {
				t.Skip("chown needs root")
			}
			os.Mkdir(filepath.Join(dir, "real"), 0o700)
			os.Symlink("real", filepath.Join(dir, "via"))
			os.Lchown(filepath.Join(dir, "via"), 65534, 65534)
			return filepath.Join(dir, "via", "flight"), filepath.Join(dir, "real")
		}},
		{"directory others may write", "a directory on its path others may write", func(t *testing.T, dir string) (string, string) {
			open := filepath.Join(dir, "open")
			os.Mkdir(open, 0o700)
			os.Chmod(open, 0o770)
			return filepath.Join(open, "flight"), open
		}},
		{"another user's file", "owned by another user", func(t *testing.T, dir string) (string, string) {
			if os.Geteuid() != 0 {
				t.Skip("chown needs root")
			}
			path := filepath.Join(dir, "theirs")
			os.WriteFile(path, nil, 0o666)
			os.Chown(path, 65534, 65534)
			return path, path
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path, watched := c.setup(t, t.TempDir())
			before, _ := os.Lstat(watched)
			read := func() []byte {
				if !before.Mode().IsRegular() {
					return nil // a device without end
				}
				data, _ := os.ReadFile(watched)
				return data
			}
			data := read()
			if r, err := Open(path, MinSize); err == nil || !strings.Contains(err.Error(), c.want) {
				if err == nil {
					r.Close()
				}
				t.Errorf("Open: %v, want an error saying %q", err, c.want)
			}
			after, err := os.Lstat(watched)
			if got := read(); err != nil || after.Mode() != before.Mode() || !reflect.DeepEqual(got, data) {
				t.Errorf("changed: mode %v → %v, %d → %d bytes", before.Mode(), after.Mode(), len(data), len(got))
			}
			if _, err := os.Lstat(filepath.Join(watched, "flight")); err == nil {
				t.Error("a file was made behind the link")
			}
		})
	}
}

// A link of the exporter's own user (or root's) in the path is followed, as
// systemd's DynamicUser= state directory needs: /var/lib/NAME is a link to
// private/NAME.
func TestOpenFollowsOwnLinkInPath(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "private", "state"), 0o700)
	os.Symlink("private/state", filepath.Join(dir, "state"))
	os.Symlink(dir, filepath.Join(dir, "private", "up"))
	r := open(t, filepath.Join(dir, "private", "up", "state", "flight"), MinSize)
	r.Close()
	if fi, err := os.Lstat(filepath.Join(dir, "private", "state", "flight")); err != nil || !fi.Mode().IsRegular() {
		t.Errorf("the ring is not where the links lead: %v", err)
	}
}

// An empty file of the exporter's own, and a ring of another size, are
// laid out afresh; an existing file keeps its mode.
func TestOpenLaysOutEmptyAndResized(t *testing.T) {
	path := filepath.Join(t.TempDir(), "flight")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r := open(t, path, MinSize)
	r.Append(sample(0))
	r.Close()
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 || fi.Size() != MinSize {
		t.Fatalf("an empty file laid out: %v, want mode 0600 and %d bytes", err, MinSize)
	}
	r = open(t, path, 2*MinSize)
	defer r.Close()
	if fi, _ := os.Stat(path); len(r.boots) != 0 || fi.Size() != 2*MinSize {
		t.Errorf("resized: %+v kept, %d bytes", r.boots, fi.Size())
	}
}

// Read checks what it reads first: a FIFO is refused without waiting for a
// writer, a header claiming more than maxSize is not a ring, and a file
// longer than its header says reads no further.
func TestReadChecksFirst(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	syscall.Mkfifo(fifo, 0o600)
	if _, _, err := Read(fifo); err == nil || !strings.Contains(err.Error(), "a named pipe") {
		t.Errorf("FIFO: %v", err)
	}
	huge := filepath.Join(dir, "huge")
	os.WriteFile(huge, header(maxSlots+1), 0o600)
	if _, _, err := Read(huge); !errors.Is(err, ErrNotFlight) {
		t.Errorf("a header past MaxSize: %v, want ErrNotFlight", err)
	}
	path := filepath.Join(dir, "flight")
	r := open(t, path, MinSize)
	r.Append(sample(0))
	r.Close()
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.Write(make([]byte, 4*SlotSize))
	f.Close()
	if recs, damaged, err := Read(path); err != nil || len(recs) != 1 || damaged != 0 {
		t.Errorf("a file longer than its ring: %d records, %d damaged, %v", len(recs), damaged, err)
	}
}

// A name read back carries nothing that acts on a terminal.
func TestNamesReadStripped(t *testing.T) {
	rec := sample(0)
	rec.GPU.State = "cool\x1b[2J"
	rec.Workloads[0].Kind = "vllm\x1b]0;pwned\x07"
	got, err := decode(encode(nil, rec))
	if err != nil || got.GPU.State != "cool[2J" || got.Workloads[0].Kind != "vllm]0;pwned" {
		t.Errorf("decoded %q, %q (%v)", got.GPU.State, got.Workloads[0].Kind, err)
	}
}

// The verdict names the pool's low, the kernel events in order and how
// the boot ended.
func TestVerdict(t *testing.T) {
	var recs []Record
	for i := range 24 {
		r := sample(i)
		r.Pool.Usable = u64(uint64(24-i) << 28)
		r.Kernel.DriverOutOfMemory = 0
		if i >= 20 {
			r.Kernel.DriverOutOfMemory = 3
		}
		recs = append(recs, r)
	}
	other := sample(30)
	other.Boot = [16]byte{9}
	bs := boots(append(recs, other))
	if len(bs) != 2 || bs[0].Clean() {
		t.Fatalf("boots %d, first clean %v", len(bs), bs[0].Clean())
	}
	got := Verdict(bs[0], 10*time.Minute, time.UTC)
	want := "the pool ran out: usable 0.2 GiB at 22:15:15, the GPU driver failed an allocation (NV_ERR_NO_MEMORY) ×3 at 22:15:00, nothing recorded after 22:15:15"
	if got != want {
		t.Errorf("verdict\n got %q\nwant %q", got, want)
	}
	recs[len(recs)-1].Clean = true
	if v := Verdict(boots(recs)[0], 10*time.Minute, time.UTC); !strings.HasSuffix(v, "the exporter stopped cleanly at 22:15:15") {
		t.Errorf("clean verdict %q", v)
	}
}

// Whatever the file holds, decodeRing returns without a panic, and what it
// returns is bounded.
func FuzzDecode(f *testing.F) {
	path := filepath.Join(f.TempDir(), "flight")
	r, err := Open(path, MinSize)
	if err != nil {
		f.Fatal(err)
	}
	for i := range 20 {
		r.Append(sample(i))
	}
	r.Close()
	data, _ := os.ReadFile(path)
	f.Add(data)
	f.Add(data[:headerSize+3*SlotSize+7])
	f.Add(header(1 << 40))
	f.Add(header(minSlots - 1))
	f.Add(header(maxSlots + 1))
	f.Add(data[:headerLen])
	f.Add(data[:headerLen-1])
	badCRC := append([]byte(nil), data[:headerSize]...)
	badCRC[16]++
	f.Add(badCRC)
	version2 := header(minSlots)
	version2[8] = 2
	f.Add(version2)
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, damaged, err := decodeRing(data)
		if err != nil {
			return
		}
		if len(recs)+damaged > len(data)/SlotSize {
			t.Errorf("%d records and %d damaged from %d bytes", len(recs), damaged, len(data))
		}
		for _, rec := range recs {
			if len(rec.Workloads) > MaxWorkloads || (rec.Kernel != nil && len(rec.Kernel.Xid) > MaxXid) {
				t.Errorf("record out of bounds: %+v", rec)
			}
		}
	})
}

// One record: encoded, written and made durable, as the recorder does at
// every interval.
func BenchmarkAppendSync(b *testing.B) {
	r, err := Open(filepath.Join(b.TempDir(), "flight"), 1<<20)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	rec := sample(1)
	for b.Loop() {
		if err := r.Append(rec); err != nil {
			b.Fatal(err)
		}
		if err := r.Sync(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(encode(nil, rec))), "bytes/record")
}

// Previous reads, of a ring that wrapped in the middle of the previous
// boot, only that boot's window, as Window reads it from every record; the
// index knows both boots, their counts and ends, and the next number.
func TestPreviousReadsTheWindowAcrossTheWrap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "flight")
	r := open(t, path, MinSize+24*SlotSize)
	running := [16]byte{9}
	for i := range 70 {
		rec := sample(i)
		if i >= 60 {
			rec.Boot = running
		}
		r.Append(rec)
	}
	r.Close()
	all, _, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	r = open(t, path, MinSize+24*SlotSize)
	defer r.Close()
	if len(r.boots) != 2 || r.boots[0].Count != 30 || r.boots[1].Count != 10 || r.next != 70 {
		t.Fatalf("index %+v, next %d; want 30 and 10 records, next 70", r.boots, r.next)
	}
	prev, err := r.Previous(running, time.Minute)
	if err != nil || prev == nil {
		t.Fatalf("Previous: %v, %v", prev, err)
	}
	want := boots(all)[0].window(time.Minute)
	if prev.ID != boot1 || prev.Clean() || !prev.End().Equal(sample(59).Time) || !reflect.DeepEqual(prev.Records, want) || len(want) != 13 {
		t.Errorf("previous boot %x, clean %v, end %v, %d records; want %d", prev.ID, prev.Clean(), prev.End(), len(prev.Records), len(want))
	}
	if got, _ := r.Previous(boot1, time.Minute); got == nil || got.ID != running {
		t.Errorf("Previous of the other boot: %+v", got)
	}
}

// An index keeps at most maxBoots boots, the newest, however many the
// file holds.
func TestIndexBounded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "flight")
	r := open(t, path, headerSize+3*maxBoots*SlotSize)
	for i := range 3 * maxBoots {
		rec := sample(i)
		rec.Boot = [16]byte{byte(i), byte(i >> 8)}
		r.Append(rec)
	}
	r.Close()
	f, err := OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	bs := f.Boots()
	last := 3*maxBoots - 1
	if len(bs) != maxBoots || bs[len(bs)-1].ID != [16]byte{byte(last), byte(last >> 8)} {
		t.Errorf("%d boots, the last %x", len(bs), bs[len(bs)-1].ID)
	}
}

// A digest lists maxEvents kernel events and counts the rest.
func TestDigestEventsBounded(t *testing.T) {
	var d Digest
	for i := range maxEvents + 11 {
		rec := sample(i)
		rec.Kernel = &Kernel{OOMGlobal: uint64(i)}
		d.Add(rec)
	}
	if len(d.Events()) != maxEvents || d.EventsLeftOut != 10 || !strings.Contains(d.Verdict(time.UTC), "10 more kernel events") {
		t.Errorf("%d events, %d left out", len(d.Events()), d.EventsLeftOut)
	}
}

// Whatever the file holds, indexing it and reading each boot returns
// without a panic, bounded: no more boots than maxBoots, no boot read
// beyond the ring's slots, every record read numbered below next.
func FuzzIndex(f *testing.F) {
	path := filepath.Join(f.TempDir(), "flight")
	r, err := Open(path, MinSize)
	if err != nil {
		f.Fatal(err)
	}
	for i := range 40 {
		rec := sample(i)
		rec.Boot[0] = byte(i / 15)
		r.Append(rec)
	}
	r.Close()
	data, _ := os.ReadFile(path)
	f.Add(data)
	f.Add(data[:headerSize+5*SlotSize+9])
	f.Add(header(minSlots))
	f.Fuzz(func(t *testing.T, data []byte) {
		n, ok := parseHeader(data)
		if !ok || len(data) < headerSize {
			return
		}
		s := slotFile{bytes.NewReader(data), n}
		bs, next, _, err := s.index()
		if err != nil || len(bs) > maxBoots {
			t.Fatalf("%d boots, %v", len(bs), err)
		}
		for _, b := range bs {
			read := 0
			s.each(b, func(time.Time) bool { return true }, func(r Record) {
				if read++; r.N >= next || r.Boot != b.ID {
					t.Errorf("record %d of boot %x, next %d", r.N, r.Boot, next)
				}
			})
			if uint64(read) > n {
				t.Errorf("boot %x: %d records from %d slots", b.ID, read, n)
			}
		}
	})
}

// Opening a full 64 MiB ring of one unclean boot, and reading that boot's
// last ten minutes, as the exporter does at start: from the page cache,
// and with the file's pages dropped first (as after a reboot).
func BenchmarkOpenFull(b *testing.B) {
	path := filepath.Join(b.TempDir(), "flight")
	const size = 64 << 20
	r, err := Open(path, size)
	if err != nil {
		b.Fatal(err)
	}
	for i := range r.slots {
		r.Append(sample(int(i)))
	}
	r.Sync()
	r.Close()
	for _, cold := range []bool{false, true} {
		b.Run(map[bool]string{false: "cached", true: "cold"}[cold], func(b *testing.B) {
			for b.Loop() {
				if cold {
					b.StopTimer()
					dropCache(b, path)
					b.StartTimer()
				}
				r, err := Open(path, size)
				if err != nil {
					b.Fatal(err)
				}
				if prev, err := r.Previous([16]byte{}, 10*time.Minute); err != nil || len(prev.Records) != 121 {
					b.Fatalf("%v, %v", prev, err)
				}
				r.Close()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(size>>20), "ns/MiB")
		})
	}
}

func dropCache(b *testing.B, path string) {
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		b.Fatal(err)
	}
}

// The signs read back as written, a record without them decodes as before
// (rings written before they were kept), and a longer record would not fit
// its slot.
func TestSignsRoundTrip(t *testing.T) {
	with := sample(3)
	with.Signs = &Signs{Fragmented: true, NVMLStalledSeconds: 540, SMMUTimeouts: 1 << 40}
	without := sample(3)
	for _, rec := range []Record{with, without} {
		b := encode(nil, rec)
		got, err := decode(b)
		if err != nil || !reflect.DeepEqual(got, rec) {
			t.Errorf("decode: %v\n got %+v\nwant %+v", err, got, rec)
		}
		if len(b) > SlotSize-slotHeader {
			t.Errorf("a record of %d bytes does not fit a slot", len(b))
		}
	}
	if b := encode(nil, with); len(b) <= len(encode(nil, without)) {
		t.Error("the signs were not written")
	}
}

// The verdict names each sign in the runbooks' words, once when it begins:
// the pool fragmenting, the driver hanging (and for how long at the end),
// the IOMMU's timeouts counted.
func TestVerdictNamesTheSigns(t *testing.T) {
	var recs []Record
	for i := range 12 {
		r := sample(i)
		r.Kernel.DriverOutOfMemory = 0
		r.Signs = &Signs{Fragmented: i >= 3, SMMUTimeouts: uint64(max(i-8, 0) * 5)}
		if i >= 6 {
			r.Signs.NVMLStalledSeconds = uint64(i-6)*5 + 25
		}
		recs = append(recs, r)
	}
	recs[11].Signs.NVMLStalledSeconds = 540
	got := Verdict(boots(recs)[0], 10*time.Minute, time.UTC)
	for _, want := range []string{
		"the pool is fragmented: no free block of 32 MiB at 22:13:35",
		"the GPU driver stopped answering at 22:14:00",
		"the IOMMU began timing out (CMD_SYNC) at 22:14:05",
		"the GPU driver had not answered for 9 minutes",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("verdict %q\nlacks %q", got, want)
		}
	}
	for _, once := range []string{"fragmented", "IOMMU"} {
		if n := strings.Count(got, once); n != 1 {
			t.Errorf("%s named %d times, want once", once, n)
		}
	}
}

// decodeRing: only a wrong header is an error; a truncated file reads up to its end.
func decodeRing(data []byte) ([]Record, int, error) {
	slots, ok := parseHeader(data)
	if !ok || len(data) > maxSize {
		return nil, 0, ErrNotFlight
	}
	recs, _, damaged, err := scan(bytes.NewReader(data[min(len(data), headerSize):]), slots)
	return recs, damaged, err
}
