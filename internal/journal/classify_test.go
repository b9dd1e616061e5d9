package journal

import (
	"maps"
	"strconv"
	"testing"
)

var (
	oomdWriter    = entry{Unit: "systemd-oomd.service", Comm: "systemd-oomd", UID: "104"}
	earlyWriter   = entry{Unit: "earlyoom.service", Comm: "earlyoom", UID: "61934"}
	nohangWriter  = entry{Unit: "nohang.service", Comm: "nohang", UID: "0"}
	earlyoomKillM = `sending SIGTERM to process 2101 uid 1000 "python3": badness 900, VmRSS 60000 MiB`
	oomdKillM     = "Killed /system.slice/a.service due to memory used (1) / total (2) and swap used (1) / total (2) being more than 90.00%"
)

func with(e entry, msg string, at uint64) entry {
	e.Message, e.Realtime = msg, at
	return e
}

// Only the killer's own process in the killer's own system unit, as a
// system account, writes its lines: the trusted fields journald takes from
// the kernel, which a user's logger or systemd-cat cannot set.
func TestWriter(t *testing.T) {
	for _, tc := range []struct {
		name string
		e    entry
		want string
	}{
		{"systemd-oomd as systemd-oom", oomdWriter, systemdOomd},
		{"earlyoom as its DynamicUser", earlyWriter, earlyOOM},
		{"earlyoom as root", entry{Unit: "earlyoom.service", Comm: "earlyoom", UID: "0"}, earlyOOM},
		{"nohang as root", nohangWriter, nohang},
		{"nohang-desktop", entry{Unit: "nohang-desktop.service", Comm: "nohang", UID: "0"}, nohang},
		{"a user's logger -t earlyoom", entry{Unit: "session-2.scope", Comm: "logger", UID: "1000"}, ""},
		{"a user's systemd-cat -t earlyoom", entry{Unit: "session-2.scope", Comm: "earlyoom", UID: "1000"}, ""},
		{"a user unit named earlyoom.service", entry{Unit: "user@1000.service", Comm: "earlyoom", UID: "1000"}, ""},
		{"a login user's uid in the killer's unit", entry{Unit: "earlyoom.service", Comm: "earlyoom", UID: "1000"}, ""},
		{"nobody", entry{Unit: "earlyoom.service", Comm: "earlyoom", UID: "65534"}, ""},
		{"another process in the killer's unit", entry{Unit: "earlyoom.service", Comm: "sh", UID: "61934"}, ""},
		{"another killer's name", entry{Unit: "earlyoom.service", Comm: "nohang", UID: "0"}, ""},
		{"no trusted fields", entry{}, ""},
		{"a uid that is no number", entry{Unit: "earlyoom.service", Comm: "earlyoom", UID: "0x0"}, ""},
	} {
		got, ok := writer(tc.e)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("%s: writer = %q, %v; want %q", tc.name, got, ok, tc.want)
		}
	}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		killer, msg string
		want        line
	}{
		{systemdOomd, "Killed /system.slice/docker-3f0e.scope due to memory used (124814819328) / total (128027983872) and swap used (15569256448) / total (17179865088) being more than 90.00%", line{kill: true}},
		{systemdOomd, "Killed /user.slice/user-1000.slice/user@1000.service/app.slice/x.scope due to memory pressure for /user.slice/user-1000.slice/user@1000.service being 80.53% > 50.00% for > 20s with reclaim activity", line{kill: true}},
		{systemdOomd, "Marked /system.slice/vllm.service for killing due to memory used (1) / total (2) and swap used (1) / total (2) being more than 90.00%", line{kill: true}},
		{systemdOomd, "Considered 4 cgroups for killing, top candidates were:", line{}},
		{systemdOomd, "oomd dry-run: Would have tried to kill /sys/fs/cgroup/system.slice/x.service and all its descendants", line{}},
		{systemdOomd, "Killed", line{}},
		{earlyOOM, earlyoomKillM, line{kill: true, pid: 2101}},
		{earlyOOM, `sending SIGKILL to process 77 uid 0 "x": oom_score 1, oom_score_adj 0, VmRSS 1 MiB, cmdline "x --key=secret"`, line{kill: true, pid: 77}},
		{earlyOOM, `sending SIGTERM to process 12 "java": badness 800, VmRSS 900 MiB`, line{kill: true, pid: 12}},
		{earlyOOM, "sending SIGTERM when mem <= 10.00% and swap <= 10.00%,", line{}},
		{earlyOOM, "sending SIGKILL when mem <=  5.00% and swap <=  5.00%", line{}},
		{earlyOOM, "escalating to SIGKILL after 0.5 seconds", line{}},
		{earlyOOM, "sending SIGTERM to process -1 uid 0", line{}},
		{earlyOOM, "sending SIGTERM to process 0x10 uid 0", line{}},
		{earlyOOM, "sending SIGTERM to process 10", line{}},
		{nohang, "  Sending SIGTERM to the victim", line{kill: true}},
		{nohang, "Sending SIGKILL to the victim", line{kill: true}},
		{nohang, "  Sending SIGKILL to the victim; OK", line{kill: true}},
		{nohang, "Sending SIGKILL to the victims", line{}},
		{nohang, "[ OK ] Sending SIGTERM to python3: 1", line{}},
		{nohang, "Implementing a corrective action:", line{}},
		{nohang, "  PID:       2301, name: python3, state: S (sleeping), EUID: 1000", line{pid: 2301, victim: true}},
		{nohang, "  PID:       x, name: python3", line{}},
		{earlyOOM, "  Sending SIGTERM to the victim", line{}},
		{nohang, earlyoomKillM, line{}},
	} {
		if got := parse(tc.killer, tc.msg); got != tc.want {
			t.Errorf("parse(%s, %q) = %+v, want %+v", tc.killer, tc.msg, got, tc.want)
		}
	}
}

const second = uint64(1e6)

// A process signalled again (escalated, or retried) is killed once; the
// same pid a while later is another process.
func TestTallyCountsAProcessOnce(t *testing.T) {
	tl := newTally()
	for _, e := range []entry{
		with(earlyWriter, earlyoomKillM, 100*second),
		with(earlyWriter, "escalating to SIGKILL after 0.5 seconds", 100*second+500_000),
		with(earlyWriter, `sending SIGKILL to process 2101 uid 1000 "python3": badness 900, VmRSS 59871 MiB`, 111*second),
		with(earlyWriter, `sending SIGTERM to process 2102 uid 1000 "python3": badness 900, VmRSS 1 MiB`, 112*second),
		with(earlyWriter, earlyoomKillM, 3600*second),

		with(nohangWriter, "  PID:       2301, name: python3, state: S", 200*second),
		with(nohangWriter, "  Sending SIGTERM to the victim", 200*second),
		with(nohangWriter, "  PID:       2301, name: python3, state: R", 210*second),
		with(nohangWriter, "  Sending SIGKILL to the victim", 210*second),
		// Without a victim line (print_victim_status off) every action counts.
		with(nohangWriter, "  Sending SIGTERM to the victim", 300*second),
		with(nohangWriter, "  Sending SIGTERM to the victim", 301*second),

		with(oomdWriter, oomdKillM, 5*second),
	} {
		tl.add(e)
	}
	want := map[string]uint64{earlyOOM: 3, nohang: 3, systemdOomd: 1}
	if !maps.Equal(tl.kills, want) {
		t.Errorf("kills = %v, want %v", tl.kills, want)
	}
}

// A forged line counts nothing, whatever its text.
func TestTallyIgnoresForgedLines(t *testing.T) {
	tl := newTally()
	user := entry{Unit: "session-2.scope", Comm: "logger", UID: "1000"}
	for _, msg := range []string{earlyoomKillM, "  Sending SIGKILL to the victim", oomdKillM} {
		tl.add(with(user, msg, second))
	}
	// A forged victim line does not steer nohang's next kill either.
	tl.add(with(user, "  PID:       1, name: systemd", second))
	if tl.victim != 0 {
		t.Errorf("a user's line set nohang's victim to %d", tl.victim)
	}
	if want := map[string]uint64{earlyOOM: 0, nohang: 0, systemdOomd: 0}; !maps.Equal(tl.kills, want) {
		t.Errorf("kills = %v, want %v", tl.kills, want)
	}
}

// Memory stays bounded however many processes are killed.
func TestTallyBounded(t *testing.T) {
	tl := newTally()
	for pid := 1; pid <= 1000; pid++ {
		tl.add(with(earlyWriter, "sending SIGTERM to process "+strconv.Itoa(pid)+` uid 0 "x": badness 1, VmRSS 1 MiB`, uint64(pid)*second))
	}
	if tl.kills[earlyOOM] != 1000 || len(tl.recent[earlyOOM]) > recentKills {
		t.Errorf("kills %d, %d remembered", tl.kills[earlyOOM], len(tl.recent[earlyOOM]))
	}
}

func FuzzTally(f *testing.F) {
	f.Add("earlyoom.service", "earlyoom", "61934", earlyoomKillM, uint64(1))
	f.Add("nohang.service", "nohang", "0", "  PID:       2301, name: python3", uint64(2))
	f.Add("nohang.service", "nohang", "0", "  Sending SIGKILL to the victim; OK", uint64(3))
	f.Add("systemd-oomd.service", "systemd-oomd", "104", "Killed / due to memory pressure for /", uint64(4))
	f.Add("session-2.scope", "logger", "1000", earlyoomKillM, uint64(5))
	f.Fuzz(func(t *testing.T, unit, comm, uid, msg string, at uint64) {
		tl := newTally()
		e := entry{Unit: unit, Comm: comm, UID: uid, Message: msg, Realtime: at}
		tl.add(e)
		tl.add(e)
		var total uint64
		for _, n := range tl.kills {
			total += n
		}
		if len(tl.kills) != len(Killers) || total > 2 {
			t.Errorf("kills %v from two entries", tl.kills)
		}
		if _, ok := writer(e); !ok && total > 0 {
			t.Errorf("counted %v from an entry of no killer: %+v", tl.kills, e)
		}
	})
}
