package flight

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Boot is the records of one boot, oldest first.
type Boot struct {
	ID      [16]byte
	Records []Record
}

// Clean reports whether the boot's last record is an exporter's clean
// stop: a boot that ended otherwise wedged, lost power or was reset (or
// its exporter was killed).
func (b Boot) Clean() bool { return len(b.Records) > 0 && b.Records[len(b.Records)-1].Clean }

// End is the time of the boot's last record.
func (b Boot) End() time.Time { return b.Records[len(b.Records)-1].Time }

// Boots groups records (oldest first) by boot, oldest boot first.
func Boots(recs []Record) []Boot {
	var boots []Boot
	for _, r := range recs {
		if len(boots) == 0 || boots[len(boots)-1].ID != r.Boot {
			boots = append(boots, Boot{ID: r.Boot})
		}
		b := &boots[len(boots)-1]
		b.Records = append(b.Records, r)
	}
	return boots
}

// Window is the records of b from d before its end.
func (b Boot) Window(d time.Duration) []Record {
	if len(b.Records) == 0 {
		return nil
	}
	from := b.End().Add(-d)
	for i, r := range b.Records {
		if !r.Time.Before(from) {
			return b.Records[i:]
		}
	}
	return nil
}

// Event is a kernel event the records show, at the record that first
// counted it.
type Event struct {
	At   time.Time
	What string
}

// Events lists the kernel events between consecutive records (of one
// boot), in order: the counters' growth from one record to the next.
func Events(recs []Record) []Event {
	var out []Event
	var prev *Kernel
	for _, r := range recs {
		k := r.Kernel
		if k == nil {
			continue
		}
		if prev != nil {
			add := func(now, before uint64, what string) {
				if now > before {
					n := now - before
					if n > 1 {
						what = fmt.Sprintf("%s ×%d", what, n)
					}
					out = append(out, Event{r.Time, what})
				}
			}
			add(k.DriverOutOfMemory, prev.DriverOutOfMemory, "the GPU driver failed an allocation (NV_ERR_NO_MEMORY)")
			add(k.OOMGlobal, prev.OOMGlobal, "global OOM kill")
			add(k.OOMCgroup, prev.OOMCgroup, "cgroup OOM kill")
			add(k.AERFatal, prev.AERFatal, "fatal PCIe error")
			add(k.AERNonFatal, prev.AERNonFatal, "non-fatal PCIe error")
			for _, x := range k.Xid {
				var before uint64
				for _, p := range prev.Xid {
					if p.Code == x.Code {
						before = p.Count
					}
				}
				add(x.Count, before, fmt.Sprintf("Xid %d", x.Code))
			}
		}
		prev = k
	}
	return out
}

// Usable is a record's usable pool memory: spark_pool_usable_bytes where
// recorded, MemAvailable otherwise; ok false without a pool reading.
func (r Record) Usable() (uint64, bool) {
	if r.Pool == nil {
		return 0, false
	}
	if r.Pool.Usable != nil {
		return *r.Pool.Usable, true
	}
	return r.Pool.Available, true
}

// RanOutBytes is the usable memory under which the verdict says the pool
// ran out: the default --pool.reserve, what the OS and the driver need.
const RanOutBytes = 4 << 30

// Verdict is one line on the records of a boot's last minutes (window):
// the lowest usable memory if the pool ran out, the kernel events, and
// how the boot ended.
func Verdict(b Boot, window time.Duration, loc *time.Location) string {
	recs := b.Window(window)
	if len(recs) == 0 {
		return "nothing recorded"
	}
	clock := func(t time.Time) string { return t.In(loc).Format("15:04:05") }
	var parts []string
	low, lowAt, have := uint64(0), time.Time{}, false
	for _, r := range recs {
		if u, ok := r.Usable(); ok && (!have || u < low) {
			low, lowAt, have = u, r.Time, true
		}
	}
	ranOut := have && low < RanOutBytes
	if ranOut {
		parts = append(parts, fmt.Sprintf("the pool ran out: usable %s at %s", GiB(low), clock(lowAt)))
	}
	for _, ev := range Events(recs) {
		parts = append(parts, fmt.Sprintf("%s at %s", ev.What, clock(ev.At)))
	}
	if !ranOut && have {
		parts = append(parts, fmt.Sprintf("usable memory lowest %s at %s", GiB(low), clock(lowAt)))
	}
	end := b.End()
	if b.Clean() {
		parts = append(parts, "the exporter stopped cleanly at "+clock(end))
	} else {
		parts = append(parts, "nothing recorded after "+clock(end))
	}
	return strings.Join(parts, ", ")
}

// GiB renders bytes as GiB with one decimal.
func GiB(b uint64) string { return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30)) }

// ParseBootID parses /proc/sys/kernel/random/boot_id (a UUID); zero when
// it is not one.
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
