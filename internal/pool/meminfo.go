package pool

import (
	"bytes"
	"fmt"
	"strconv"
)

// Meminfo holds the /proc/meminfo lines the pool is worked out from, as the
// kernel prints them: sizes in kB, HugePages_Total in pages. A nil field is
// a line the kernel did not print.
type Meminfo struct {
	MemTotal, MemFree, MemAvailable *uint64
	Buffers, Cached, SReclaimable   *uint64
	Shmem, Mapped                   *uint64
	HugePagesTotal, Hugepagesize    *uint64
}

// meminfoLines names the lines ParseMeminfo reads, each with its field.
var meminfoLines = map[string]func(*Meminfo) **uint64{
	"MemTotal":        func(m *Meminfo) **uint64 { return &m.MemTotal },
	"MemFree":         func(m *Meminfo) **uint64 { return &m.MemFree },
	"MemAvailable":    func(m *Meminfo) **uint64 { return &m.MemAvailable },
	"Buffers":         func(m *Meminfo) **uint64 { return &m.Buffers },
	"Cached":          func(m *Meminfo) **uint64 { return &m.Cached },
	"SReclaimable":    func(m *Meminfo) **uint64 { return &m.SReclaimable },
	"Shmem":           func(m *Meminfo) **uint64 { return &m.Shmem },
	"Mapped":          func(m *Meminfo) **uint64 { return &m.Mapped },
	"HugePages_Total": func(m *Meminfo) **uint64 { return &m.HugePagesTotal },
	"Hugepagesize":    func(m *Meminfo) **uint64 { return &m.Hugepagesize },
}

// ParseMeminfo reads the text of /proc/meminfo. It is hand-written rather
// than prometheus/procfs's, which parses all sixty lines with a scanner and
// a few allocations each, at every scrape (docs/performance.md). Lines it
// does not use are skipped whatever their shape. A line it uses must be
// "Name: value" or "Name: value kB" with a decimal value; a malformed or
// repeated one is an error, since a guess would be worse than nothing.
// Errors never quote the file.
func ParseMeminfo(data []byte) (Meminfo, error) {
	var m Meminfo
	values := new([10]uint64) // one allocation for every field
	used := 0
	for len(data) > 0 {
		var line []byte
		line, data, _ = bytes.Cut(data, []byte{'\n'})
		name, rest, ok := bytes.Cut(line, []byte{':'})
		if !ok {
			continue
		}
		field, ok := meminfoLines[string(name)] // no allocation: the compiler keys the map with the bytes
		if !ok {
			continue
		}
		dst := field(&m)
		if *dst != nil {
			return Meminfo{}, fmt.Errorf("meminfo: %s appears twice", name)
		}
		number, unit, _ := bytes.Cut(bytes.TrimSpace(rest), []byte{' '})
		v, err := strconv.ParseUint(string(number), 10, 64)
		if err != nil || (len(unit) > 0 && string(unit) != "kB") {
			return Meminfo{}, fmt.Errorf("meminfo: %s is not a size", name)
		}
		values[used] = v
		*dst = &values[used]
		used++
	}
	return m, nil
}
