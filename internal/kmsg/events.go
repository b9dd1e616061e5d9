package kmsg

import (
	"regexp"
	"strconv"
	"strings"
)

type kind int

const (
	oomKill kind = iota + 1
	driverOutOfMemory
	xid
	pcieAER
	smmuTimeout
)

const (
	Global = "global"
	Cgroup = "cgroup"
)

const (
	Corrected = "corrected"
	NonFatal  = "nonfatal"
	Fatal     = "fatal"
)

type event struct {
	Kind       kind
	Constraint string
	Code       int
	Severity   string
}

// maxXid: NVIDIA's Xid catalogue ends below 200; a larger number is a misread line.
const maxXid = 999

// A process's name (at most 15 bytes) may start a kernel message, so each
// pattern goes on past 15 bytes with text such a line cannot carry there.
var (
	// NVRM: Xid (PCI:0000:01:00): 79, … (the driver's nv_report_error).
	xidLine = regexp.MustCompile(`^NVRM: Xid \(PCI:[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\): ([0-9]{1,4}),`)
	// nvCheckOkFailedNoLog, nvAssertOkFailedNoLog; some drivers name the GPU first.
	driverNoMemoryLine = regexp.MustCompile(`^NVRM: (?:GPU[0-9]+ )?[A-Za-z_][A-Za-z0-9_]*: (?:Check|Assertion) failed: Out of memory \[NV_ERR_NO_MEMORY\] \(0x00000051\)`)
	// mm/oom_kill.c dump_oom_summary.
	oomConstraintLine = regexp.MustCompile(`^oom-kill:constraint=(CONSTRAINT_[A-Z_]+),`)
	// mm/oom_kill.c __oom_kill_process, after oom_kill_process's message.
	oomKilledLine = regexp.MustCompile(`^(Out of memory|Out of memory \(oom_kill_allocating_task\)|Memory cgroup out of memory): Killed process [0-9]+ \(`)
	// aer_print_error, behind dev_printk's prefix.
	aerLine = regexp.MustCompile(`^[A-Za-z0-9_.-]+ [0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]: PCIe Bus Error: severity=([A-Za-z() -]+), `)
	// arm-smmu-v3.c; older kernels end the line at "timeout".
	smmuTimeoutLine = regexp.MustCompile(`^arm-smmu-v3 [A-Za-z0-9_.:-]+: CMD_SYNC timeout(?:$| at 0x)`)
)

// classifier counts once an event that spans several records: an OOM kill's
// constraint line (before 4.19, which prints none, its "Killed process" line);
// a PCIe AER error's severity line, one per device. The zero value is ready.
type classifier struct {
	// oomPending: a constraint line was counted, its "Killed process" not yet.
	oomPending bool
}

func (c *classifier) classify(msg string) (event, bool) {
	switch {
	case strings.HasPrefix(msg, "NVRM: "):
		return nvrmEvent(msg)
	case strings.HasPrefix(msg, "oom-kill:"):
		m := oomConstraintLine.FindStringSubmatch(msg)
		if m == nil {
			return event{}, false
		}
		c.oomPending = true
		return event{Kind: oomKill, Constraint: oomConstraint(m[1])}, true
	case strings.Contains(msg, ": Killed process "):
		return c.killed(msg)
	case smmuTimeoutLine.MatchString(msg):
		return event{Kind: smmuTimeout}, true
	case strings.Contains(msg, ": PCIe Bus Error: "):
		if m := aerLine.FindStringSubmatch(msg); m != nil {
			if sev, ok := aerSeverity(m[1]); ok {
				return event{Kind: pcieAER, Severity: sev}, true
			}
		}
	}
	return event{}, false
}

func nvrmEvent(msg string) (event, bool) {
	if m := xidLine.FindStringSubmatch(msg); m != nil {
		code, _ := strconv.Atoi(m[1])
		if code <= 0 || code > maxXid {
			return event{}, false
		}
		return event{Kind: xid, Code: code}, true
	}
	if driverNoMemoryLine.MatchString(msg) {
		return event{Kind: driverOutOfMemory}, true
	}
	return event{}, false
}

func (c *classifier) killed(msg string) (event, bool) {
	m := oomKilledLine.FindStringSubmatch(msg)
	if m == nil {
		return event{}, false
	}
	if c.oomPending {
		c.oomPending = false
		return event{}, false
	}
	if m[1] == "Memory cgroup out of memory" {
		return event{Kind: oomKill, Constraint: Cgroup}, true
	}
	return event{Kind: oomKill, Constraint: Global}, true
}

// oomConstraint: CONSTRAINT_MEMCG and CONSTRAINT_CPUSET are a cgroup's limit;
// the others are global (a Spark has one node, so a mempolicy's is all).
func oomConstraint(name string) string {
	switch name {
	case "CONSTRAINT_MEMCG", "CONSTRAINT_CPUSET":
		return Cgroup
	default:
		return Global
	}
}

// aerSeverity also takes 6.x's Correctable and Uncorrectable (…).
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
