package kmsg

import (
	"regexp"
	"strconv"
	"strings"
)

// Kind is what an event is.
type Kind int

const (
	// OOMKill is one process killed by the kernel's OOM killer.
	OOMKill Kind = iota + 1
	// DriverOutOfMemory is an NVRM line naming NV_ERR_NO_MEMORY.
	DriverOutOfMemory
	// Xid is an NVRM Xid event.
	Xid
	// PCIeAER is one PCIe Advanced Error Reporting error.
	PCIeAER
	// SMMUTimeout is a CMD_SYNC the ARM SMMU did not complete.
	SMMUTimeout
)

// OOM constraints, as the metric's label names them.
const (
	// Global is CONSTRAINT_NONE: the whole pool ran out.
	Global = "global"
	// Cgroup is CONSTRAINT_MEMCG: a cgroup's (a container's) limit.
	Cgroup = "cgroup"
)

// AER severities, as the metric's label names them.
const (
	Corrected = "corrected"
	NonFatal  = "nonfatal"
	Fatal     = "fatal"
)

// Event is one counted event.
type Event struct {
	Kind Kind
	// Constraint of an OOMKill: Global or Cgroup.
	Constraint string
	// Code of an Xid.
	Code int
	// Severity of a PCIeAER.
	Severity string
}

// MaxXid bounds the Xid codes counted: NVIDIA's catalogue
// (docs.nvidia.com/deploy/xid-errors) ends below 200; a larger number is a
// line this parser misread, not a code, and is not counted.
const MaxXid = 999

// The patterns match a message from its first byte, where the kernel and
// the driver start these lines. A process's name (at most 15 bytes) may
// also start a kernel message ("NAME[PID]: segfault at …"), so each
// pattern goes on past 15 bytes with text such a line cannot carry there:
// a PCI address, a constraint's name, a fixed phrase.
var (
	// NVRM: Xid (PCI:0000:01:00): 79, … (the driver's nv_report_error).
	xidLine = regexp.MustCompile(`^NVRM: Xid \(PCI:[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\): ([0-9]{1,4}),`)
	// The driver's failed check or assertion of an allocation
	// (nvCheckOkFailedNoLog, nvAssertOkFailedNoLog), some drivers naming
	// the GPU first.
	driverNoMemoryLine = regexp.MustCompile(`^NVRM: (?:GPU[0-9]+ )?[A-Za-z_][A-Za-z0-9_]*: (?:Check|Assertion) failed: Out of memory \[NV_ERR_NO_MEMORY\] \(0x00000051\)`)
	// mm/oom_kill.c dump_oom_summary.
	oomConstraintLine = regexp.MustCompile(`^oom-kill:constraint=(CONSTRAINT_[A-Z_]+),`)
	// mm/oom_kill.c __oom_kill_process, after oom_kill_process's message.
	oomKilledLine = regexp.MustCompile(`^(Out of memory|Out of memory \(oom_kill_allocating_task\)|Memory cgroup out of memory): Killed process [0-9]+ \(`)
	// drivers/pci/pcie/aer.c aer_print_error, behind dev_printk's
	// "DRIVER DOMAIN:BUS:DEVICE.FUNCTION: ".
	aerLine = regexp.MustCompile(`^[A-Za-z0-9_.-]+ [0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]: PCIe Bus Error: severity=([A-Za-z() -]+), `)
	// drivers/iommu/arm/arm-smmu-v3/arm-smmu-v3.c, behind dev_printk's
	// "arm-smmu-v3 DEVICE: "; older kernels end the line at "timeout".
	smmuTimeoutLine = regexp.MustCompile(`^arm-smmu-v3 [A-Za-z0-9_.:-]+: CMD_SYNC timeout(?:$| at 0x)`)
)

// Classifier turns records into events, counting once an event that spans
// several records:
//
//   - an OOM kill logs "… invoked oom-killer", a dump, then
//     "oom-kill:constraint=CONSTRAINT_…,…" and "Out of memory: Killed process …"
//     (or "Memory cgroup out of memory: …"). The constraint line is the
//     event; before 4.19, which prints none, the "Killed process" line is;
//   - a PCIe AER error logs "AER: … error received …" from the root port,
//     then "PCIe Bus Error: severity=…" per device: the severity line is the
//     event, since one message can report errors of several devices.
//
// The zero value is ready. It reads messages only: the reader passes it
// the kernel's own records.
type Classifier struct {
	// oomPending: a constraint line was counted, its "Killed process" not yet.
	oomPending bool
}

// Classify returns the event msg completes, if any.
func (c *Classifier) Classify(msg string) (Event, bool) {
	switch {
	case strings.HasPrefix(msg, "NVRM: "):
		return nvrmEvent(msg)
	case strings.HasPrefix(msg, "oom-kill:"):
		m := oomConstraintLine.FindStringSubmatch(msg)
		if m == nil {
			return Event{}, false
		}
		c.oomPending = true
		return Event{Kind: OOMKill, Constraint: oomConstraint(m[1])}, true
	case strings.Contains(msg, ": Killed process "):
		return c.killed(msg)
	case smmuTimeoutLine.MatchString(msg):
		return Event{Kind: SMMUTimeout}, true
	case strings.Contains(msg, ": PCIe Bus Error: "):
		if m := aerLine.FindStringSubmatch(msg); m != nil {
			if sev, ok := aerSeverity(m[1]); ok {
				return Event{Kind: PCIeAER, Severity: sev}, true
			}
		}
	}
	return Event{}, false
}

func nvrmEvent(msg string) (Event, bool) {
	if m := xidLine.FindStringSubmatch(msg); m != nil {
		code, _ := strconv.Atoi(m[1])
		if code <= 0 || code > MaxXid {
			return Event{}, false
		}
		return Event{Kind: Xid, Code: code}, true
	}
	if driverNoMemoryLine.MatchString(msg) {
		return Event{Kind: DriverOutOfMemory}, true
	}
	return Event{}, false
}

// killed counts a "Killed process" line whose kill no constraint line
// counted.
func (c *Classifier) killed(msg string) (Event, bool) {
	m := oomKilledLine.FindStringSubmatch(msg)
	if m == nil {
		return Event{}, false
	}
	if c.oomPending {
		c.oomPending = false
		return Event{}, false
	}
	if m[1] == "Memory cgroup out of memory" {
		return Event{Kind: OOMKill, Constraint: Cgroup}, true
	}
	return Event{Kind: OOMKill, Constraint: Global}, true
}

// oomConstraint maps the kernel's enum oom_constraint (mm/oom_kill.c) to
// the label: CONSTRAINT_MEMCG and CONSTRAINT_CPUSET are a cgroup's limit;
// the others are global (a Spark has one node, so a mempolicy's is all).
func oomConstraint(name string) string {
	switch name {
	case "CONSTRAINT_MEMCG", "CONSTRAINT_CPUSET":
		return Cgroup
	default:
		return Global
	}
}

// aerSeverity maps the kernel's severity names (aer_error_severity_string):
// Corrected, Uncorrected (Non-Fatal), Uncorrected (Fatal), and since 6.x
// Correctable and Uncorrectable (…).
func aerSeverity(name string) (string, bool) {
	switch name {
	case "Corrected", "Correctable":
		return Corrected, true
	case "Uncorrected (Non-Fatal)", "Uncorrectable (Non-Fatal)":
		return NonFatal, true
	case "Uncorrected (Fatal)", "Uncorrectable (Fatal)":
		return Fatal, true
	}
	return "", false
}
