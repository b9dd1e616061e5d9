package kmsg

import (
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
// The zero value is ready.
type Classifier struct {
	// oomPending: a constraint line was counted, its "Killed process" not yet.
	oomPending bool
}

// Classify returns the event msg completes, if any.
func (c *Classifier) Classify(msg string) (Event, bool) {
	switch {
	case strings.HasPrefix(msg, "oom-kill:"):
		c.oomPending = true
		return Event{Kind: OOMKill, Constraint: oomConstraint(msg)}, true
	case strings.Contains(msg, "Killed process "):
		if c.oomPending {
			c.oomPending = false
			return Event{}, false
		}
		if strings.HasPrefix(msg, "Memory cgroup out of memory") {
			return Event{Kind: OOMKill, Constraint: Cgroup}, true
		}
		if strings.HasPrefix(msg, "Out of memory") {
			return Event{Kind: OOMKill, Constraint: Global}, true
		}
		return Event{}, false
	}
	if i := strings.Index(msg, "NVRM: "); i >= 0 {
		rest := msg[i+len("NVRM: "):]
		if strings.HasPrefix(rest, "Xid ") {
			if code, ok := xidCode(rest); ok {
				return Event{Kind: Xid, Code: code}, true
			}
			return Event{}, false
		}
		if strings.Contains(rest, "NV_ERR_NO_MEMORY") {
			return Event{Kind: DriverOutOfMemory}, true
		}
		return Event{}, false
	}
	if i := strings.Index(msg, "PCIe Bus Error: severity="); i >= 0 {
		if sev, ok := aerSeverity(msg[i+len("PCIe Bus Error: severity="):]); ok {
			return Event{Kind: PCIeAER, Severity: sev}, true
		}
	}
	return Event{}, false
}

// oomConstraint maps the kernel's enum oom_constraint (mm/oom_kill.c) to
// the label: CONSTRAINT_MEMCG and CONSTRAINT_CPUSET are a cgroup's limit;
// the others are global (a Spark has one node, so a mempolicy's is all).
func oomConstraint(msg string) string {
	rest, _ := strings.CutPrefix(msg, "oom-kill:constraint=")
	name, _, _ := strings.Cut(rest, ",")
	switch name {
	case "CONSTRAINT_MEMCG", "CONSTRAINT_CPUSET":
		return Cgroup
	default:
		return Global
	}
}

// xidCode reads the code of "Xid (PCI:0000:01:00): 79, pid=…".
func xidCode(rest string) (int, bool) {
	_, after, ok := strings.Cut(rest, "): ")
	if !ok {
		return 0, false
	}
	end := 0
	for end < len(after) && end < 4 && after[end] >= '0' && after[end] <= '9' {
		end++
	}
	if end == 0 || (end < len(after) && after[end] != ',' && after[end] != ' ') {
		return 0, false
	}
	code, err := strconv.Atoi(after[:end])
	if err != nil || code <= 0 || code > MaxXid {
		return 0, false
	}
	return code, true
}

// aerSeverity reads the severity of "PCIe Bus Error: severity=…": the
// kernel has written Corrected, Uncorrected (Non-Fatal) and Uncorrected
// (Fatal), and since 6.x Correctable and Uncorrectable (…).
func aerSeverity(rest string) (string, bool) {
	name, _, _ := strings.Cut(rest, ",")
	switch {
	case strings.HasPrefix(name, "Correct"):
		return Corrected, true
	case strings.Contains(name, "Non-Fatal"):
		return NonFatal, true
	case strings.Contains(name, "Fatal"):
		return Fatal, true
	}
	return "", false
}
