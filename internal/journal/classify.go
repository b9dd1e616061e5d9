// Package journal counts this boot's kills by the userspace OOM killers
// (systemd-oomd, earlyoom, nohang) in the systemd journal.
package journal

import (
	"strconv"
	"strings"
)

const (
	systemdOomd = "systemd-oomd"
	earlyOOM    = "earlyoom"
	nohang      = "nohang"
)

var Killers = []string{systemdOomd, earlyOOM, nohang}

const maxField = 4096 // bytes of a field read; a kill line is ~200

// entry: the fields with a leading underscore are journald's, from the
// kernel's view of the sender, which the sender cannot set.
type entry struct {
	Message  string // MESSAGE
	Unit     string // _SYSTEMD_UNIT
	Comm     string // _COMM
	UID      string // _UID
	Realtime uint64 // µs since the epoch
}

// killer's units carry Debian's and upstream's names.
type killer struct {
	name  string
	units []string
	comm  string
}

var killers = []killer{
	{systemdOomd, []string{"systemd-oomd.service"}, "systemd-oomd"},
	{earlyOOM, []string{"earlyoom.service"}, "earlyoom"},
	{nohang, []string{"nohang.service", "nohang-desktop.service"}, "nohang"},
}

func units() []string {
	var all []string
	for _, k := range killers {
		all = append(all, k.units...)
	}
	return all
}

// writer is the killer whose unit and process wrote e as a system account
// (not uid 0 alone: systemd-oomd runs as systemd-oom, earlyoom as a
// DynamicUser), never a login user.
func writer(e entry) (string, bool) {
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

// systemUID: below 1000 (Debian's SYS_UID_MAX is 999) or DynamicUser's
// 61184–65519.
func systemUID(s string) bool {
	uid, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return false
	}
	return uid < 1000 || uid >= 61184 && uid <= 65519
}

type line struct {
	kill, victim bool
	pid          int
}

// parse: testdata/journal/README.md has each format's source.
func parse(killer, msg string) line {
	switch killer {
	case systemdOomd:
		return line{kill: oomdKill(msg)}
	case earlyOOM:
		pid, ok := earlyoomKill(msg)
		return line{kill: ok, pid: pid}
	case nohang:
		msg = strings.TrimSpace(msg)
		if pid, ok := nohangVictim(msg); ok {
			return line{pid: pid, victim: true}
		}
		return line{kill: nohangKill(msg)}
	}
	return line{}
}

// oomdKill: "Killed CGROUP due to memory used (…" or "… memory pressure
// for …", "Marked CGROUP for killing due to …" in later systemd. A cgroup
// is one kill.
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
// (no uid before 1.5), or SIGKILL; not its start-up "sending SIGTERM when".
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

// nohangVictim: "PID:       1234, name: python3, …", logged before it acts
// (print_victim_status, on by default).
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

func nohangKill(msg string) bool {
	for _, sig := range []string{"SIGTERM", "SIGKILL"} {
		if rest, ok := strings.CutPrefix(msg, "Sending "+sig+" to the victim"); ok {
			return rest == "" || strings.HasPrefix(rest, ";")
		}
	}
	return false
}
