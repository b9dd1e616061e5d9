// Package flight is the flight recorder: a fixed-size ring of checksummed
// samples on disk that survives a power cut, so that after a wedge and a power
// cycle the minutes before can be read back.
package flight

import (
	"encoding/binary"
	"errors"
	"math"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/safetext"
)

type Record struct {
	N    uint64
	Time time.Time
	Boot [16]byte
	// Clean marks the record an exporter wrote as it stopped on SIGTERM or SIGINT.
	Clean     bool
	Pool      *Pool
	Pressure  *Pressure
	GPU       *GPU
	Kernel    *Kernel
	Workloads []Workload
	// Signs is nil in records of older rings.
	Signs *Signs
}

// Signs are the exporter's own judgements at the record.
type Signs struct {
	Fragmented         bool
	NVMLStalledSeconds uint64
	SMMUTimeouts       uint64
}

// Pool is in bytes.
type Pool struct {
	Free, Available, Cache uint64
	CMAFree, Usable        *uint64
}

// Pressure is in microseconds.
type Pressure struct {
	Some uint64
	Full *uint64
}

// GPU is the first GPU's reading; a NaN field was not reported.
type GPU struct {
	TemperatureCelsius, PowerWatts, SMClockHertz float64
	State                                        string
}

// Kernel keeps the MaxXid most frequent Xid codes.
type Kernel struct {
	OOMGlobal, OOMCgroup, DriverOutOfMemory uint64
	AERCorrected, AERNonFatal, AERFatal     uint64
	Xid                                     []XidCount
}

type XidCount struct {
	Code  int
	Count uint64
}

type Workload struct {
	Role, Kind    string
	ResidentBytes uint64
}

// So that a record fits its slot.
const (
	MaxWorkloads = 6
	MaxXid       = 4
	maxName      = 24
)

const (
	hasPool = 1 << iota
	hasCMA
	hasUsable
	hasPressure
	hasFull
	hasGPU
	hasKernel
	isClean
)

var errShort = errors.New("flight: record truncated")

func encode(b []byte, rec Record) []byte {
	var flags byte
	if rec.Pool != nil {
		flags |= hasPool
		if rec.Pool.CMAFree != nil {
			flags |= hasCMA
		}
		if rec.Pool.Usable != nil {
			flags |= hasUsable
		}
	}
	if rec.Pressure != nil {
		flags |= hasPressure
		if rec.Pressure.Full != nil {
			flags |= hasFull
		}
	}
	if rec.GPU != nil {
		flags |= hasGPU
	}
	if rec.Kernel != nil {
		flags |= hasKernel
	}
	if rec.Clean {
		flags |= isClean
	}
	b = binary.AppendVarint(b, rec.Time.UnixMilli())
	b = append(b, rec.Boot[:]...)
	b = append(b, flags)
	if p := rec.Pool; p != nil {
		b = binary.AppendUvarint(b, p.Free)
		b = binary.AppendUvarint(b, p.Available)
		b = binary.AppendUvarint(b, p.Cache)
		if p.CMAFree != nil {
			b = binary.AppendUvarint(b, *p.CMAFree)
		}
		if p.Usable != nil {
			b = binary.AppendUvarint(b, *p.Usable)
		}
	}
	if p := rec.Pressure; p != nil {
		b = binary.AppendUvarint(b, p.Some)
		if p.Full != nil {
			b = binary.AppendUvarint(b, *p.Full)
		}
	}
	if g := rec.GPU; g != nil {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(g.TemperatureCelsius)))
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(g.PowerWatts)))
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(float32(g.SMClockHertz)))
		b = appendName(b, g.State)
	}
	if k := rec.Kernel; k != nil {
		for _, v := range []uint64{k.OOMGlobal, k.OOMCgroup, k.DriverOutOfMemory, k.AERCorrected, k.AERNonFatal, k.AERFatal} {
			b = binary.AppendUvarint(b, v)
		}
		xid := k.Xid[:min(len(k.Xid), MaxXid)]
		b = append(b, byte(len(xid)))
		for _, x := range xid {
			b = binary.AppendUvarint(b, uint64(max(x.Code, 0)))
			b = binary.AppendUvarint(b, x.Count)
		}
	}
	ws := rec.Workloads[:min(len(rec.Workloads), MaxWorkloads)]
	b = append(b, byte(len(ws)))
	for _, w := range ws {
		b = appendName(b, w.Role)
		b = appendName(b, w.Kind)
		b = binary.AppendUvarint(b, w.ResidentBytes)
	}
	if sg := rec.Signs; sg != nil {
		// A trailer, so that records written before it still decode.
		b = append(b, signsTag, boolByte(sg.Fragmented))
		b = binary.AppendUvarint(b, sg.NVMLStalledSeconds)
		b = binary.AppendUvarint(b, sg.SMMUTimeouts)
	}
	return b
}

const signsTag = 1

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

func appendName(b []byte, s string) []byte {
	s = s[:min(len(s), maxName)]
	return append(append(b, byte(len(s))), s...)
}

// decoder remembers the first error.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errShort
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes(n int) []byte {
	if d.err != nil || len(d.b) < n {
		d.err = errShort
		return nil
	}
	out := d.b[:n]
	d.b = d.b[n:]
	return out
}

func (d *decoder) byte() byte {
	if b := d.bytes(1); b != nil {
		return b[0]
	}
	return 0
}

func (d *decoder) float() float64 {
	if b := d.bytes(4); b != nil {
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(b)))
	}
	return 0
}

// name strips what would act on a terminal: a workload's kind comes from a command line.
func (d *decoder) name() string {
	n := int(d.byte())
	if n > maxName {
		d.err = errors.New("flight: name too long")
		return ""
	}
	return safetext.Strip(string(d.bytes(n)))
}

func (d *decoder) optional(set bool) *uint64 {
	if !set {
		return nil
	}
	v := d.uvarint()
	return &v
}

func decode(b []byte) (Record, error) {
	d := &decoder{b: b}
	var rec Record
	ms, n := binary.Varint(d.b)
	if n <= 0 {
		return rec, errShort
	}
	d.b = d.b[n:]
	rec.Time = time.UnixMilli(ms)
	copy(rec.Boot[:], d.bytes(16))
	flags := d.byte()
	rec.Clean = flags&isClean != 0
	if flags&hasPool != 0 {
		p := &Pool{Free: d.uvarint(), Available: d.uvarint(), Cache: d.uvarint()}
		p.CMAFree = d.optional(flags&hasCMA != 0)
		p.Usable = d.optional(flags&hasUsable != 0)
		rec.Pool = p
	}
	if flags&hasPressure != 0 {
		rec.Pressure = &Pressure{Some: d.uvarint()}
		rec.Pressure.Full = d.optional(flags&hasFull != 0)
	}
	if flags&hasGPU != 0 {
		rec.GPU = &GPU{TemperatureCelsius: d.float(), PowerWatts: d.float(), SMClockHertz: d.float()}
		rec.GPU.State = d.name()
	}
	if flags&hasKernel != 0 {
		k := &Kernel{OOMGlobal: d.uvarint(), OOMCgroup: d.uvarint(), DriverOutOfMemory: d.uvarint(),
			AERCorrected: d.uvarint(), AERNonFatal: d.uvarint(), AERFatal: d.uvarint()}
		n := int(d.byte())
		if n > MaxXid {
			return rec, errors.New("flight: too many Xid codes")
		}
		for range n {
			code, count := d.uvarint(), d.uvarint()
			if code > 1<<16 {
				return rec, errors.New("flight: Xid code out of range")
			}
			k.Xid = append(k.Xid, XidCount{Code: int(code), Count: count})
		}
		rec.Kernel = k
	}
	n = int(d.byte())
	if n > MaxWorkloads {
		return rec, errors.New("flight: too many workloads")
	}
	for range n {
		rec.Workloads = append(rec.Workloads, Workload{Role: d.name(), Kind: d.name(), ResidentBytes: d.uvarint()})
	}
	if d.err == nil && len(d.b) > 0 && d.b[0] == signsTag {
		d.byte()
		rec.Signs = &Signs{Fragmented: d.byte() == 1, NVMLStalledSeconds: d.uvarint(), SMMUTimeouts: d.uvarint()}
	}
	if d.err != nil {
		return Record{}, d.err
	}
	return rec, nil
}
