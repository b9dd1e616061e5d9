// Package vmstat parses /proc/vmstat's memory pressure counters: procfs has no parser for it.
package vmstat

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
)

// Counters: nil means the kernel does not print that counter, which is not 0.
type Counters struct {
	MajorFaults *uint64 // pgmajfault
	// Kernels before 5.9 printed one workingset_refault: that is RefaultsFile.
	RefaultsAnon *uint64 // workingset_refault_anon
	RefaultsFile *uint64 // workingset_refault_file, or workingset_refault
	// Summed over zones on kernels before 4.8 (pgsteal_kswapd_normal, ...).
	ReclaimedKswapd *uint64 // pgsteal_kswapd*
	ReclaimedDirect *uint64 // pgsteal_direct*
	AllocStalls     *uint64 // allocstall, or the sum of allocstall_<zone>
	OOMKills        *uint64 // oom_kill (since 4.13)
	// Direct compaction, absent on kernels built without CONFIG_COMPACTION.
	CompactStalls *uint64 // compact_stall: allocations that compacted first
	CompactFails  *uint64 // compact_fail: compactions that found no block
}

// Parse skips unknown lines whatever their shape; a malformed or repeated known
// line is an error, since a guess is worse than nothing.
func Parse(data []byte) (Counters, error) {
	var c Counters
	fields := [...]**uint64{
		fieldMajorFaults: &c.MajorFaults, fieldRefaultsAnon: &c.RefaultsAnon,
		fieldRefaultsFile: &c.RefaultsFile, fieldReclaimedKswapd: &c.ReclaimedKswapd,
		fieldReclaimedDirect: &c.ReclaimedDirect, fieldAllocStalls: &c.AllocStalls,
		fieldOOMKills: &c.OOMKills, fieldCompactStalls: &c.CompactStalls,
		fieldCompactFails: &c.CompactFails,
	}
	// The kernel writes whole lines: one without its end was cut short.
	if len(data) > 0 && data[len(data)-1] != '\n' {
		return Counters{}, errors.New("vmstat: truncated: the last line has no line end")
	}
	var seen uint64 // bit i set once names[i]'s line has been read
	for len(data) > 0 {
		var line []byte
		line, data, _ = bytes.Cut(data, []byte{'\n'})
		name, rest, _ := bytes.Cut(line, []byte{' '})
		n, ok := names[string(name)] // no allocation: the compiler keys the map with the bytes
		if !ok {
			continue
		}
		if seen&(1<<n.bit) != 0 {
			return Counters{}, fmt.Errorf("vmstat: %s appears twice", name)
		}
		seen |= 1 << n.bit
		v, err := strconv.ParseUint(string(rest), 10, 64)
		if err != nil {
			return Counters{}, fmt.Errorf("vmstat: %s: value is not a counter: %w", name, err)
		}
		dst := fields[n.field]
		if *dst == nil {
			*dst = new(uint64)
		}
		if **dst > math.MaxUint64-v {
			return Counters{}, fmt.Errorf("vmstat: %s: sum overflows 64 bits", name)
		}
		**dst += v
	}
	return c, nil
}

const (
	fieldMajorFaults = iota
	fieldRefaultsAnon
	fieldRefaultsFile
	fieldReclaimedKswapd
	fieldReclaimedDirect
	fieldAllocStalls
	fieldOOMKills
	fieldCompactStalls
	fieldCompactFails
)

type name struct {
	field int  // which Counters field the line adds to
	bit   uint // its own bit, to catch a name printed twice
}

// names: several lines add to one field where kernels split a counter by zone.
var names = func() map[string]name {
	byField := [][]string{
		fieldMajorFaults:  {"pgmajfault"},
		fieldRefaultsAnon: {"workingset_refault_anon"},
		fieldRefaultsFile: {"workingset_refault_file", "workingset_refault"},
		fieldReclaimedKswapd: {"pgsteal_kswapd", "pgsteal_kswapd_dma", "pgsteal_kswapd_dma32",
			"pgsteal_kswapd_normal", "pgsteal_kswapd_high", "pgsteal_kswapd_movable"},
		fieldReclaimedDirect: {"pgsteal_direct", "pgsteal_direct_dma", "pgsteal_direct_dma32",
			"pgsteal_direct_normal", "pgsteal_direct_high", "pgsteal_direct_movable"},
		fieldAllocStalls: {"allocstall", "allocstall_dma", "allocstall_dma32",
			"allocstall_normal", "allocstall_high", "allocstall_movable", "allocstall_device"},
		fieldOOMKills:      {"oom_kill"},
		fieldCompactStalls: {"compact_stall"},
		fieldCompactFails:  {"compact_fail"},
	}
	m := map[string]name{}
	for field, list := range byField {
		for _, n := range list {
			m[n] = name{field: field, bit: uint(len(m))}
		}
	}
	return m
}()
