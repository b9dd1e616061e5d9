package kmsg

import (
	"maps"

	"github.com/spark-exporter/spark_exporter/internal/judge"
)

// maxXidCodes bounds the quiet Xid codes kept (a GPU logs a handful); codes that page are always kept.
const maxXidCodes = 64

const (
	Overrun   = "overrun"
	Malformed = "malformed"
	// NotKernel: a user's, a daemon's or a container's write to /dev/kmsg.
	NotKernel = "not_kernel"
)

type Counts struct {
	// Fixed keys are always present.
	OOMKills          map[string]uint64
	DriverOutOfMemory uint64
	Xid               map[int]uint64
	AER               map[string]uint64
	SMMUTimeouts      uint64
	LeftOut           uint64
	Skipped           map[string]uint64
}

func NewCounts() Counts {
	return Counts{
		OOMKills: map[string]uint64{Global: 0, Cgroup: 0},
		Xid:      map[int]uint64{},
		AER:      map[string]uint64{Corrected: 0, NonFatal: 0, Fatal: 0},
		Skipped:  map[string]uint64{Overrun: 0, Malformed: 0, NotKernel: 0},
	}
}

func (c *Counts) add(ev event) {
	switch ev.Kind {
	case oomKill:
		c.OOMKills[ev.Constraint]++
	case driverOutOfMemory:
		c.DriverOutOfMemory++
	case smmuTimeout:
		c.SMMUTimeouts++
	case xid:
		if _, ok := c.Xid[ev.Code]; !ok && !judge.XidPages(ev.Code) && c.quietXids() >= maxXidCodes {
			c.LeftOut++
			return
		}
		c.Xid[ev.Code]++
	case pcieAER:
		c.AER[ev.Severity]++
	}
}

func (c *Counts) quietXids() int {
	n := 0
	for code := range c.Xid {
		if !judge.XidPages(code) {
			n++
		}
	}
	return n
}

func (c Counts) clone() Counts {
	c.OOMKills, c.Xid, c.AER, c.Skipped = maps.Clone(c.OOMKills), maps.Clone(c.Xid), maps.Clone(c.AER), maps.Clone(c.Skipped)
	return c
}
