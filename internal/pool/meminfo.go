package pool

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"

	"github.com/prometheus/procfs"
)

// parseMeminfo refuses what procfs's parser takes (a key twice, a size cut
// before its unit, a file cut mid-number): a wrong figure is worse than none.
func parseMeminfo(data []byte) (procfs.Meminfo, error) {
	var m procfs.Meminfo
	if len(data) == 0 {
		return m, errors.New("meminfo: empty")
	}
	if data[len(data)-1] != '\n' {
		return m, errors.New("meminfo: truncated: the last line has no line end")
	}
	fields := map[string]struct {
		dst  **uint64
		unit string // "kB" for sizes, "" for counts
	}{
		"MemTotal": {&m.MemTotal, "kB"}, "MemFree": {&m.MemFree, "kB"}, "MemAvailable": {&m.MemAvailable, "kB"},
		"Buffers": {&m.Buffers, "kB"}, "Cached": {&m.Cached, "kB"}, "SReclaimable": {&m.SReclaimable, "kB"},
		"Shmem": {&m.Shmem, "kB"}, "Mapped": {&m.Mapped, "kB"},
		"HugePages_Total": {&m.HugePagesTotal, ""}, "Hugepagesize": {&m.Hugepagesize, "kB"},
		"CmaTotal": {&m.CmaTotal, "kB"}, "CmaFree": {&m.CmaFree, "kB"},
	}
	for line := range bytes.Lines(data) {
		key, rest, ok := bytes.Cut(bytes.TrimSuffix(line, []byte{'\n'}), []byte{':'})
		f, used := fields[string(key)]
		if !ok || !used {
			continue
		}
		if *f.dst != nil {
			return procfs.Meminfo{}, fmt.Errorf("meminfo: %s appears twice", key)
		}
		number, unit, _ := bytes.Cut(bytes.TrimLeft(rest, " "), []byte{' '})
		v, err := strconv.ParseUint(string(number), 10, 64)
		if err != nil || string(unit) != f.unit {
			want := "a number"
			if f.unit != "" {
				want = "a number of " + f.unit
			}
			return procfs.Meminfo{}, fmt.Errorf("meminfo: %s: value is not %s", key, want)
		}
		*f.dst = &v
	}
	return m, nil
}
