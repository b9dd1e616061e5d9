package flight

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/judge"
	"github.com/spark-exporter/spark_exporter/internal/units"
)

// Boot is one boot in a flight file.
type Boot struct {
	ID          [16]byte
	Count       int
	Records     []Record
	first, last uint64
	end         time.Time
	clean       bool
}

// Clean: a boot that ended otherwise wedged, lost power or was reset (or its exporter was killed).
func (b Boot) Clean() bool { return b.clean }

func (b Boot) End() time.Time { return b.end }

func boots(recs []Record) []Boot {
	var out []Boot
	for _, r := range recs {
		if len(out) == 0 || out[len(out)-1].ID != r.Boot {
			out = append(out, Boot{ID: r.Boot, first: r.N})
		}
		b := &out[len(out)-1]
		b.Records = append(b.Records, r)
		b.Count, b.last, b.end, b.clean = len(b.Records), r.N, r.Time, r.Clean
	}
	return out
}

// Since is fed the times oldest first.
func (b Boot) Since(d time.Duration) func(time.Time) bool {
	from, on := b.end.Add(-d), false
	return func(t time.Time) bool {
		on = on || !t.Before(from)
		return on
	}
}

func (b Boot) window(d time.Duration) []Record {
	keep := b.Since(d)
	for i, r := range b.Records {
		if keep(r.Time) {
			return b.Records[i:]
		}
	}
	return nil
}

// Event is at the record that first counted it.
type Event struct {
	At   time.Time
	What string
}

const maxEvents = 256

// Digest is fed oldest first.
type Digest struct {
	low, last     Record
	have, any     bool
	events        []Event
	EventsLeftOut int
	prev          *Kernel
	prevSigns     *Signs
	smmu          bool
}

func (d *Digest) Add(r Record) {
	if u, ok := r.Usable(); ok {
		if l, _ := d.low.Usable(); !d.have || u < l {
			d.low, d.have = r, true
		}
	}
	d.last, d.any = r, true
	d.addSigns(r)
	k := r.Kernel
	if k == nil {
		return
	}
	if p := d.prev; p != nil {
		d.event(r.Time, k.DriverOutOfMemory, p.DriverOutOfMemory, "the GPU driver failed an allocation (NV_ERR_NO_MEMORY)")
		d.event(r.Time, k.OOMGlobal, p.OOMGlobal, "global OOM kill")
		d.event(r.Time, k.OOMCgroup, p.OOMCgroup, "cgroup OOM kill")
		d.event(r.Time, k.AERFatal, p.AERFatal, "fatal PCIe error")
		d.event(r.Time, k.AERNonFatal, p.AERNonFatal, "non-fatal PCIe error")
		for _, x := range k.Xid {
			var before uint64
			for _, q := range p.Xid {
				if q.Code == x.Code {
					before = q.Count
				}
			}
			d.event(r.Time, x.Count, before, fmt.Sprintf("Xid %d", x.Code))
		}
	}
	d.prev = k
}

// addSigns speaks in the words of the runbooks.
func (d *Digest) addSigns(r Record) {
	sg := r.Signs
	if sg == nil {
		return
	}
	var was Signs
	if d.prevSigns != nil {
		was = *d.prevSigns
	}
	if sg.Fragmented && !was.Fragmented {
		d.event(r.Time, 1, 0, "the pool is fragmented: no free block of 32 MiB")
	}
	if hung(sg) && !hung(&was) {
		d.event(r.Time, 1, 0, "the GPU driver stopped answering")
	}
	// A lost GPU's IOMMU times out about once a second: named once.
	if d.prevSigns != nil && sg.SMMUTimeouts > was.SMMUTimeouts && !d.smmu {
		d.event(r.Time, 1, 0, "the IOMMU began timing out (CMD_SYNC)")
		d.smmu = true
	}
	d.prevSigns = sg
}

// waited says a wait as the status page does.
func waited(secs uint64) string {
	if secs < 120 {
		return fmt.Sprintf("%d seconds", secs)
	}
	return fmt.Sprintf("%d minutes", secs/60)
}

func hung(sg *Signs) bool { return float64(sg.NVMLStalledSeconds) > judge.NVMLStalledSeconds }

func (d *Digest) event(at time.Time, now, before uint64, what string) {
	if now <= before {
		return
	}
	if len(d.events) == maxEvents {
		d.EventsLeftOut++
		return
	}
	if n := now - before; n > 1 {
		what = fmt.Sprintf("%s ×%d", what, n)
	}
	d.events = append(d.events, Event{at, what})
}

func (d *Digest) Events() []Event { return d.events }

func (d *Digest) Verdict(loc *time.Location) string {
	if !d.any {
		return "nothing recorded"
	}
	clock := func(t time.Time) string { return t.In(loc).Format("15:04:05") }
	var parts []string
	low, _ := d.low.Usable()
	ranOut := d.have && low < ranOutBytes
	if ranOut {
		parts = append(parts, fmt.Sprintf("the pool ran out: usable %s at %s", gib(low), clock(d.low.Time)))
	}
	for _, ev := range d.events {
		parts = append(parts, fmt.Sprintf("%s at %s", ev.What, clock(ev.At)))
	}
	if d.EventsLeftOut > 0 {
		parts = append(parts, fmt.Sprintf("%d more kernel events", d.EventsLeftOut))
	}
	if !ranOut && d.have {
		parts = append(parts, fmt.Sprintf("usable memory lowest %s at %s", gib(low), clock(d.low.Time)))
	}
	if sg := d.last.Signs; sg != nil && hung(sg) {
		parts = append(parts, "the GPU driver had not answered for "+waited(sg.NVMLStalledSeconds))
	}
	if d.last.Clean {
		parts = append(parts, "the exporter stopped cleanly at "+clock(d.last.Time))
	} else {
		parts = append(parts, "nothing recorded after "+clock(d.last.Time))
	}
	return strings.Join(parts, ", ")
}

// Usable is MemAvailable where usable memory was not recorded.
func (r Record) Usable() (uint64, bool) {
	if r.Pool == nil {
		return 0, false
	}
	if r.Pool.Usable != nil {
		return *r.Pool.Usable, true
	}
	return r.Pool.Available, true
}

// ranOutBytes is the default --pool.reserve, what the OS and the driver need.
const ranOutBytes = 4 << 30

// Verdict is one line on a boot's last minutes (window).
func Verdict(b Boot, window time.Duration, loc *time.Location) string {
	var d Digest
	for _, r := range b.window(window) {
		d.Add(r)
	}
	return d.Verdict(loc)
}

func gib(b uint64) string { return units.FormatGiB(float64(b)) }

// ParseBootID is zero when the text is no UUID.
func ParseBootID(data []byte) [16]byte {
	var id [16]byte
	hex := strings.ReplaceAll(strings.TrimSpace(string(data)), "-", "")
	if len(hex) != 32 {
		return id
	}
	for i := range id {
		v, err := strconv.ParseUint(hex[2*i:2*i+2], 16, 8)
		if err != nil {
			return [16]byte{}
		}
		id[i] = byte(v)
	}
	return id
}
