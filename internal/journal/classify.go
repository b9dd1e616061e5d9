// Package journal counts the kills of the userspace OOM killers
// (systemd-oomd, earlyoom, nohang) that the systemd journal recorded this
// boot, reading it in the background through libsystemd.
package journal

import (
	"strconv"
	"strings"
)

// The killers, as the killer label names them.
const (
	SystemdOomd = "systemd-oomd"
	EarlyOOM    = "earlyoom"
	Nohang      = "nohang"
)

// Killers lists every killer, in the order they are exported.
var Killers = []string{SystemdOomd, EarlyOOM, Nohang}

// maxField bounds the bytes of one field read: a kill line is ~200.
const maxField = 4096

// Entry is the part of a journal entry the classifier reads. The fields
// with a leading underscore are journald's own, taken from the kernel's
// view of the sender (its cgroup, uid and comm); the sender cannot set them.
type Entry struct {
	Message string // MESSAGE
	Unit    string // _SYSTEMD_UNIT
	Comm    string // _COMM
	UID     string // _UID
	// Realtime is when journald received it, in µs since the epoch.
	Realtime uint64
}

// killer is how the journal shows each killer's own lines: the system unit
// it runs in (Debian's and upstream's unit names) and its process name.
type killer struct {
	name  string
	units []string
	comm  string
}

var killers = []killer{
	{SystemdOomd, []string{"systemd-oomd.service"}, "systemd-oomd"},
	{EarlyOOM, []string{"earlyoom.service"}, "earlyoom"},
	{Nohang, []string{"nohang.service", "nohang-desktop.service"}, "nohang"},
}

// units is every killer's unit, for the journal's match.
func units() []string {
	var all []string
	for _, k := range killers {
		all = append(all, k.units...)
	}
	return all
}

// writer is the killer that wrote e, if e's trusted fields say one did:
// its unit, its process name, and a system account's uid (root, a system
// user such as systemd-oom, or a DynamicUser as earlyoom's unit has), never
// a login user's.
func writer(e Entry) (string, bool) {
	if !systemUID(e.UID) {
		return "", false
	}
	for _, k := range killers {
		for _, u := range k.units {
			if e.Unit == u && e.Comm == k.comm {
				return k.name, true
			}
		}
	}
	return "", false
}

// systemUID: below 1000 (Debian's SYS_UID_MAX is 999), or systemd's range
// for DynamicUser= (61184–65519).
func systemUID(s string) bool {
	uid, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return false
	}
	return uid < 1000 || uid >= 61184 && uid <= 65519
}

// line is what one of a killer's lines says.
type line struct {
	kill bool
	// pid is the process signalled (earlyoom), or the victim nohang
	// describes before it acts; 0 when the line names none.
	pid    int
	victim bool // a nohang victim line: pid is the next kill's
}

// parse reads one of killer's own messages. The formats are the killers'
// (testdata/journal/README.md has each line's source).
func parse(killer, msg string) line {
	switch killer {
	case SystemdOomd:
		return line{kill: oomdKill(msg)}
	case EarlyOOM:
		pid, ok := earlyoomKill(msg)
		return line{kill: ok, pid: pid}
	case Nohang:
		msg = strings.TrimSpace(msg)
		if pid, ok := nohangVictim(msg); ok {
			return line{pid: pid, victim: true}
		}
		return line{kill: nohangKill(msg)}
	}
	return line{}
}

// oomdKill: "Killed CGROUP due to memory used (…" or "… due to memory
// pressure for …" (systemd up to 257), "Marked CGROUP for killing due to …"
// (later systemd, which kills after its prekill hooks). A cgroup is one
// kill, however many processes it held.
func oomdKill(msg string) bool {
	if rest, ok := strings.CutPrefix(msg, "Killed /"); ok {
		return strings.Contains(rest, " due to memory used (") || strings.Contains(rest, " due to memory pressure for ")
	}
	if rest, ok := strings.CutPrefix(msg, "Marked /"); ok {
		return strings.Contains(rest, " for killing due to memory ")
	}
	return false
}

// earlyoomKill: `sending SIGTERM to process 1234 uid 1000 "python3": …`
// (the uid since 1.5), or SIGKILL. "escalating to SIGKILL" follows for the
// same process and is not a second kill.
func earlyoomKill(msg string) (int, bool) {
	rest, ok := strings.CutPrefix(msg, "sending SIGTERM to process ")
	if !ok {
		rest, ok = strings.CutPrefix(msg, "sending SIGKILL to process ")
	}
	if !ok {
		return 0, false
	}
	digits, after, _ := strings.Cut(rest, " ")
	pid, err := strconv.Atoi(digits)
	if err != nil || pid <= 0 || !strings.HasPrefix(after, "uid ") && !strings.HasPrefix(after, `"`) {
		return 0, false
	}
	return pid, true
}

// nohangVictim: "PID:       1234, name: python3, …", the victim status
// nohang logs before it acts (print_victim_status, on by default).
func nohangVictim(msg string) (int, bool) {
	rest, ok := strings.CutPrefix(msg, "PID:")
	if !ok {
		return 0, false
	}
	digits, _, found := strings.Cut(strings.TrimLeft(rest, " "), ", name: ")
	pid, err := strconv.Atoi(digits)
	if !found || err != nil || pid <= 0 {
		return 0, false
	}
	return pid, true
}

// nohangKill: "Sending SIGTERM to the victim" (or SIGKILL), the second
// line of its "Implementing a corrective action:" message.
func nohangKill(msg string) bool {
	for _, sig := range []string{"SIGTERM", "SIGKILL"} {
		if rest, ok := strings.CutPrefix(msg, "Sending "+sig+" to the victim"); ok {
			return rest == "" || strings.HasPrefix(rest, ";")
		}
	}
	return false
}
