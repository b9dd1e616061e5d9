package kmsg

import "maps"

// MaxXidCodes bounds the distinct Xid codes kept: a GPU logs a handful.
const MaxXidCodes = 64

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
	// LeftOut counts Xid events of codes beyond MaxXidCodes.
	LeftOut uint64
	// Malformed counts lines that were not kmsg records.
	Malformed uint64
	// Overruns counts the times the kernel's ring overwrote records
	// before they were read (EPIPE): the counts miss those records.
	Overruns uint64
}

// NewCounts returns zero counts with every fixed key present.
func NewCounts() Counts {
	return Counts{
		OOMKills: map[string]uint64{Global: 0, Cgroup: 0},
		Xid:      map[int]uint64{},
		AER:      map[string]uint64{Corrected: 0, NonFatal: 0, Fatal: 0},
	}
}

// Add counts ev.
func (c *Counts) Add(ev Event) {
	switch ev.Kind {
	case OOMKill:
		c.OOMKills[ev.Constraint]++
	case DriverOutOfMemory:
		c.DriverOutOfMemory++
	case Xid:
		if _, ok := c.Xid[ev.Code]; !ok && len(c.Xid) >= MaxXidCodes {
			c.LeftOut++
			return
		}
		c.Xid[ev.Code]++
	case PCIeAER:
		c.AER[ev.Severity]++
	}
}

// Clone returns a copy that shares nothing with c.
func (c Counts) Clone() Counts {
	c.OOMKills, c.Xid, c.AER = maps.Clone(c.OOMKills), maps.Clone(c.Xid), maps.Clone(c.AER)
	return c
}
