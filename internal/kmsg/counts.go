package kmsg

import (
	"maps"

	"github.com/spark-exporter/spark_exporter/internal/judge"
)

// MaxXidCodes bounds the distinct Xid codes kept that do not page: a GPU
// logs a handful. Codes that page (judge.XidPages) are always kept.
const MaxXidCodes = 64

// Why records were not counted, as the metric's label names them.
const (
	// Overrun: records the kernel's ring overwrote before they were read.
	Overrun = "overrun"
	// Malformed: lines that are not kmsg records, or longer than any.
	Malformed = "malformed"
	// NotKernel: records of a facility other than the kernel's: a user's,
	// a daemon's or a container's write to /dev/kmsg.
	NotKernel = "not_kernel"
)

// Counts is what the log held, counted by event.
type Counts struct {
	// OOMKills by constraint (Global, Cgroup): both always present.
	OOMKills map[string]uint64
	// DriverOutOfMemory counts NVRM NV_ERR_NO_MEMORY lines.
	DriverOutOfMemory uint64
	// Xid counts NVRM Xid events by code.
	Xid map[int]uint64
	// AER counts PCIe AER errors by severity, all three always present.
	AER map[string]uint64
	// SMMUTimeouts counts CMD_SYNC timeouts of the ARM SMMU.
	SMMUTimeouts uint64
	// LeftOut counts Xid events of codes beyond MaxXidCodes.
	LeftOut uint64
	// Skipped counts the records not counted, by why (Overrun, Malformed,
	// NotKernel): all three always present.
	Skipped map[string]uint64
}

// NewCounts returns zero counts with every fixed key present.
func NewCounts() Counts {
	return Counts{
		OOMKills: map[string]uint64{Global: 0, Cgroup: 0},
		Xid:      map[int]uint64{},
		AER:      map[string]uint64{Corrected: 0, NonFatal: 0, Fatal: 0},
		Skipped:  map[string]uint64{Overrun: 0, Malformed: 0, NotKernel: 0},
	}
}

// Add counts ev.
func (c *Counts) Add(ev Event) {
	switch ev.Kind {
	case OOMKill:
		c.OOMKills[ev.Constraint]++
	case DriverOutOfMemory:
		c.DriverOutOfMemory++
	case SMMUTimeout:
		c.SMMUTimeouts++
	case Xid:
		if _, ok := c.Xid[ev.Code]; !ok && !judge.XidPages(ev.Code) && c.quietXids() >= MaxXidCodes {
			c.LeftOut++
			return
		}
		c.Xid[ev.Code]++
	case PCIeAER:
		c.AER[ev.Severity]++
	}
}

// quietXids is how many codes kept do not page.
func (c *Counts) quietXids() int {
	n := 0
	for code := range c.Xid {
		if !judge.XidPages(code) {
			n++
		}
	}
	return n
}

// Clone returns a copy that shares nothing with c.
func (c Counts) Clone() Counts {
	c.OOMKills, c.Xid, c.AER, c.Skipped = maps.Clone(c.OOMKills), maps.Clone(c.Xid), maps.Clone(c.AER), maps.Clone(c.Skipped)
	return c
}
