package pool

import (
	"bytes"
	"errors"
	"fmt"
	"math/bits"
	"strconv"
)

// Zone is one line of /proc/buddyinfo; a block of order n is 2^n contiguous pages.
type Zone struct {
	Node string   // the node's number
	Name string   // the kernel's zone name: DMA, DMA32, Normal, Movable, …
	Free []uint64 // Free[n]: free blocks of order n
}

// maxOrders: kernels build 11 (MAX_PAGE_ORDER 10) to 14 (arm64 with 64 KiB pages, GB10's with 4 KiB).
const maxOrders = 32

// ParseBuddyinfo refuses what procfs's parser takes: NaN, negative and hex
// counts, a line cut short, a zone given twice.
func ParseBuddyinfo(data []byte) ([]Zone, error) {
	if len(data) == 0 {
		return nil, errors.New("buddyinfo: empty")
	}
	if data[len(data)-1] != '\n' {
		return nil, errors.New("buddyinfo: truncated: the last line has no line end")
	}
	var zones []Zone
	seen := map[[2]string]bool{}
	for line := range bytes.Lines(data) {
		z, err := parseZone(bytes.Fields(line))
		if err != nil {
			return nil, fmt.Errorf("buddyinfo: line %d: %w", len(zones)+1, err)
		}
		key := [2]string{z.Node, z.Name}
		switch {
		case seen[key]:
			return nil, fmt.Errorf("buddyinfo: node %s zone %s appears twice", z.Node, z.Name)
		case len(zones) > 0 && len(z.Free) != len(zones[0].Free):
			return nil, fmt.Errorf("buddyinfo: node %s zone %s has %d orders, the first line %d", z.Node, z.Name, len(z.Free), len(zones[0].Free))
		}
		seen[key] = true
		zones = append(zones, z)
	}
	return zones, nil
}

func parseZone(f [][]byte) (Zone, error) {
	if len(f) < 5 || string(f[0]) != "Node" || string(f[2]) != "zone" {
		return Zone{}, errors.New(`not "Node N, zone NAME" and counts`)
	}
	node, ok := bytes.CutSuffix(f[1], []byte{','})
	n, err := strconv.ParseUint(string(node), 10, 16)
	if !ok || err != nil {
		return Zone{}, errors.New("the node is not a number followed by a comma")
	}
	if !zoneName(f[3]) {
		return Zone{}, errors.New("the zone name is not a kernel zone name")
	}
	if len(f)-4 > maxOrders {
		return Zone{}, fmt.Errorf("more than %d orders", maxOrders)
	}
	z := Zone{Node: strconv.FormatUint(n, 10), Name: string(f[3]), Free: make([]uint64, len(f)-4)}
	for i, c := range f[4:] {
		if z.Free[i], err = strconv.ParseUint(string(c), 10, 64); err != nil {
			return Zone{}, fmt.Errorf("order %d: not a count", i)
		}
	}
	return z, nil
}

// zoneName: a label value, so nothing else is taken.
func zoneName(b []byte) bool {
	if len(b) == 0 || len(b) > 16 {
		return false
	}
	for _, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

// ParseKernelPageSize reads a process's smaps: no file of /proc states the page
// size for the whole kernel, and under --path.procfs a fixture can state a 64 KiB kernel's.
func ParseKernelPageSize(data []byte) (uint64, error) {
	for line := range bytes.Lines(data) {
		rest, ok := bytes.CutPrefix(line, []byte("KernelPageSize:"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) != 2 || string(f[1]) != "kB" || !bytes.HasSuffix(line, []byte{'\n'}) {
			return 0, errors.New("smaps: KernelPageSize is not a number of kB")
		}
		kb, err := strconv.ParseUint(string(f[0]), 10, 64)
		if err != nil || kb < 4 || kb > 1024 || bits.OnesCount64(kb) != 1 {
			return 0, errors.New("smaps: KernelPageSize is not a power of two from 4 kB to 1024 kB")
		}
		return kb * 1024, nil
	}
	return 0, errors.New("smaps: no KernelPageSize line")
}

func BlockBytes(pageSize uint64, order int) uint64 { return pageSize << order }

// LargeFreeBytes sums as instance:spark_pool_free_large_block_bytes:sum does;
// false where the page size is unknown or no order's block is that large.
func LargeFreeBytes(zones []Zone, pageSize, atLeast uint64) (float64, bool) {
	var sum float64
	ok := false
	for _, z := range zones {
		for order, n := range z.Free {
			if b := BlockBytes(pageSize, order); pageSize != 0 && b >= atLeast {
				sum += float64(n) * float64(b)
				ok = true
			}
		}
	}
	return sum, ok
}
