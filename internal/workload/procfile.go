package workload

import (
	"bytes"
	"errors"
	"math"
	"strconv"
	"strings"
)

type stat struct {
	PPID  int
	State byte
	// StartTime is in clock ticks after boot: with the pid, it names a
	// process for its whole life, since pids are reused.
	StartTime uint64
	// Comm is the command name, in the data parsed: valid while it is.
	Comm []byte
	// ArgStart and ArgEnd change on exec, which places a new stack at
	// random. They are 0 to a reader that may not ptrace the process, and
	// before Linux 3.5.
	ArgStart, ArgEnd uint64
}

// These parsers are not procfs's, which parses all 52 fields of stat with
// fmt.Fscan: every process's stat is read at every scrape. Their errors never
// quote the file: comm and cmdline are the process's to set.

var (
	errStatNoComm   = errors.New("stat: no command name in parentheses")
	errStatShort    = errors.New("stat: too few fields")
	errStatBadField = errors.New("stat: a field is not a number")
	errStatusRSS    = errors.New("status: VmRSS is not one size in kB")
)

// parseStat reads "pid (comm) state ppid … starttime …". comm may hold
// spaces and parentheses, so it ends at the last ')'; the kernel writes at
// most 64 bytes of it (proc_task_name), so the search stops there.
func parseStat(data []byte) (stat, error) {
	const maxComm = 64
	l := bytes.IndexByte(data, '(')
	r := bytes.LastIndexByte(data[:min(len(data), l+maxComm+2)], ')')
	if l < 0 || r < l {
		return stat{}, errStatNoComm
	}
	s := stat{Comm: data[l+1 : r]}
	// Fields after comm, counted from 0: state (0), ppid (1), …,
	// starttime (19), arg_start (45), arg_end (46), as in proc(5) where
	// they are fields 3, 4, 22, 48 and 49.
	i := r + 1
	for field := 0; field <= 46; field++ {
		for i < len(data) && data[i] == ' ' {
			i++
		}
		start := i
		for i < len(data) && data[i] != ' ' && data[i] != '\n' {
			i++
		}
		if i == start {
			if field > 19 {
				break // a kernel before 3.5: no arg_start
			}
			return stat{}, errStatShort
		}
		value := data[start:i]
		var err error
		switch field {
		case 0:
			s.State = value[0]
		case 1:
			var ppid uint64
			ppid, err = strconv.ParseUint(string(value), 10, 31)
			s.PPID = int(ppid)
		case 19:
			s.StartTime, err = strconv.ParseUint(string(value), 10, 64)
		case 45:
			s.ArgStart, err = parseAddress(value)
		case 46:
			s.ArgEnd, err = parseAddress(value)
		}
		if err != nil {
			return stat{}, errStatBadField
		}
	}
	return s, nil
}

// parseAddress parses a decimal of at most 20 digits without allocating the
// string strconv would take.
func parseAddress(value []byte) (uint64, error) {
	if len(value) > 20 {
		return 0, errStatBadField
	}
	var n uint64
	for _, c := range value {
		d := uint64(c - '0')
		if d > 9 || n > (math.MaxUint64-d)/10 {
			return 0, errStatBadField
		}
		n = n*10 + d
	}
	return n, nil
}

// parseVmRSS reads VmRSS from /proc/PID/status, in bytes; ok is false for
// kernel threads and zombies, which have none.
func parseVmRSS(data []byte) (rss uint64, ok bool, err error) {
	const key = "VmRSS:"
	at := -1
	if bytes.HasPrefix(data, []byte(key)) {
		at = 0
	} else if i := bytes.Index(data, []byte("\n"+key)); i >= 0 {
		at = i + 1
	}
	if at < 0 {
		return 0, false, nil
	}
	line, rest, _ := bytes.Cut(data[at+len(key):], []byte("\n"))
	// The kernel prints one VmRSS: a second means the file is not what
	// it seems, and either figure could be wrong.
	if bytes.HasPrefix(rest, []byte(key)) || bytes.Contains(rest, []byte("\n"+key)) {
		return 0, false, errStatusRSS
	}
	number, unit, _ := strings.Cut(strings.TrimSpace(string(line)), " ")
	kb, err := strconv.ParseUint(number, 10, 64)
	if err != nil || unit != "kB" || kb > math.MaxUint64/1024 {
		return 0, false, errStatusRSS
	}
	return kb * 1024, true, nil
}

// splitCmdline splits /proc/PID/cmdline, NUL-separated. A program that
// rewrites its title (setproctitle) pads it with NULs, which are dropped.
func splitCmdline(data []byte) []string {
	data = bytes.TrimRight(data, "\x00")
	if len(data) == 0 {
		return nil
	}
	return strings.Split(string(data), "\x00")
}
