package pool

import (
	"bytes"
	"errors"
	"fmt"
	"math/bits"
	"strconv"
)

// Zone is one line of /proc/buddyinfo: the free blocks of one zone of one
// NUMA node, by order. A block of order n is 2^n contiguous pages; the GPU
// driver's large pinned allocations need the high orders.
type Zone struct {
	Node string   // the node's number
	Name string   // the kernel's zone name: DMA, DMA32, Normal, Movable, …
	Free []uint64 // Free[n]: free blocks of order n
}

// maxOrders bounds the orders of a line: kernels build 11 (MAX_PAGE_ORDER 10)
// to 14 (13, arm64 with 64 KiB pages and NVIDIA's GB10 kernels with 4 KiB).
const maxOrders = 32

// ParseBuddyinfo reads /proc/buddyinfo, as mm/vmstat.c writes it:
//
//	Node 0, zone   Normal    151     82  …      0
//
// procfs's parser takes NaN, negative and hexadecimal counts, a line cut
// short and a zone given twice (two series of one name); here each is an
// error.
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

// zoneName is the shape of the kernel's zone names (DMA32, Normal): a
// label value, so nothing else is taken.
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

// ParseKernelPageSize reads the first KernelPageSize line of a process's
// smaps ("KernelPageSize:        4 kB"): the page size the kernel backs
// memory with. No file of /proc states it for the whole kernel; the
// exporter's own smaps does, and under --path.procfs a fixture can state a
// 64 KiB kernel's.
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

// BlockBytes is the size of a block of the given order.
func BlockBytes(pageSize uint64, order int) uint64 { return pageSize << order }

// LargeFreeBytes is the free memory in blocks of atLeast bytes or more, all
// nodes and zones together, as the recording rule
// instance:spark_pool_free_large_block_bytes:sum sums it. False where the
// page size is unknown or no order's block is that large: such a kernel
// cannot be judged by it.
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
