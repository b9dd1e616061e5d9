package journal

import "time"

// A killer that signals the same process again within window of the last
// signal is still at the same kill: earlyoom and nohang escalate SIGTERM to
// SIGKILL, and retry a victim that has not exited, within about 10 s.
const (
	window      = uint64(time.Minute / time.Microsecond)
	recentKills = 8 // per killer: bounds the memory of repeats
)

type signalled struct {
	pid int
	at  uint64
}

type tally struct {
	kills  map[string]uint64
	recent map[string][]signalled
	victim int // the victim nohang described last, until it acts
}

func newTally() tally {
	t := tally{kills: map[string]uint64{}, recent: map[string][]signalled{}}
	for _, k := range Killers {
		t.kills[k] = 0
	}
	return t
}

func (t *tally) add(e entry) {
	k, ok := writer(e)
	if !ok {
		return
	}
	l := parse(k, e.Message)
	if l.victim {
		t.victim = l.pid
		return
	}
	if !l.kill {
		return
	}
	pid := l.pid
	if k == nohang {
		pid, t.victim = t.victim, 0
	}
	if pid > 0 && t.repeat(k, pid, e.Realtime) {
		return
	}
	t.kills[k]++
}

// repeat: k signalled pid within window of at before; remembers this one.
func (t *tally) repeat(k string, pid int, at uint64) bool {
	r := t.recent[k]
	for i := range r {
		if r[i].pid == pid && max(at, r[i].at)-min(at, r[i].at) <= window {
			r[i].at = at
			return true
		}
	}
	if len(r) == recentKills {
		r = append(r[:0], r[1:]...)
	}
	t.recent[k] = append(r, signalled{pid, at})
	return false
}
