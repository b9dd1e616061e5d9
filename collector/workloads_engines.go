package collector

import (
	"errors"
	"hash/maphash"
	"strconv"

	"github.com/spark-exporter/spark_exporter/internal/container"
	"github.com/spark-exporter/spark_exporter/internal/engine"
	"github.com/spark-exporter/spark_exporter/internal/hostfs"
	"github.com/spark-exporter/spark_exporter/internal/workload"
)

// engineClaim is an engine workload and the port its command line names.
type engineClaim struct {
	w    workload.Workload
	port int
	// inodes are its sockets; nil where its descriptors are not the
	// exporter's to read, and then uid, its user, stands for them.
	inodes map[uint64]bool
	uid    int
	// read: its descriptors were read in this scan, not remembered.
	read bool
}

// holds tells whether the listener is the claim's: one of its sockets,
// or of its user where its sockets are not the exporter's to see.
func (c *engineClaim) holds(l workload.Listener) bool {
	return c.inodes[l.Inode] || (c.inodes == nil && c.uid >= 0 && c.uid == l.UID)
}

// engineSockets remembers each engine's sockets from one scan to the next.
// Reading them is a readlink per descriptor, a few µs each, and a vLLM
// holds hundreds: more than the rest of a scrape. They are read again
// when the engine is new, claims another port, or when the host's
// loopback listeners are not those of the last scan: a socket that starts
// or stops listening, which is how an engine's listener comes and goes,
// changes them, and so does an engine's exit with its listener. Only a
// listener handed between processes (inherited, or passed over a Unix
// socket), which takes the engine's own doing, changes hands unseen until
// the listeners next change.
type engineSockets struct {
	seed maphash.Seed
	// diag: the listeners are the kernel's sock_diag's (procfs), told once.
	diag bool
	// byPID: the engines' claims with their sockets as last read, while
	// each is an engine.
	byPID map[int]engineClaim
	// listeners is the digest of the loopback listeners when they were.
	listeners listenerDigest
	// walks counts the engines whose descriptors were read, for tests.
	walks int
}

// listenerDigest stands for a set of listeners: their number and the sum
// of their hashes under a seed no other process knows.
type listenerDigest struct {
	n   int
	sum uint64
}

func (d *listenerDigest) add(seed maphash.Seed, l workload.Listener) {
	d.n++
	d.sum += maphash.Comparable(seed, l)
}

// targets are the engines among the workloads where each serves its
// metrics: the port its command line names (the command line is read for
// it and dropped), asked only at a listener its own process holds.
// Where the exporter may not read the process's descriptors (another
// user's, without CAP_SYS_PTRACE), a listener of the process's user is
// taken for its own: the kernel lets one user's processes ptrace one
// another, so no finer line is drawn for them.
func (s *engineSockets) targets(proc hostfs.FS, engines []workload.Workload, refs map[int]container.Ref) []engine.Target {
	if s.byPID == nil {
		s.seed, s.byPID, s.diag = maphash.MakeSeed(), map[int]engineClaim{}, proc.IsProcfs()
	}
	claims := readClaims(proc, engines)
	remembered := false
	for i := range claims {
		s.sockets(proc, &claims[i], true)
		remembered = remembered || !claims[i].read
	}
	listeners, digest, err := s.readListeners(proc, claims)
	if err == nil && remembered && digest != s.listeners {
		for i := range claims {
			s.sockets(proc, &claims[i], false)
		}
		listeners, digest, err = s.readListeners(proc, claims)
	}
	clear(s.byPID)
	if err != nil {
		return nil
	}
	s.listeners = digest
	var targets []engine.Target
	for _, c := range claims {
		if c.inodes != nil {
			s.byPID[c.w.PID] = c
		}
		t := engine.Target{PID: c.w.PID, Kind: c.w.Kind, Container: refs[c.w.PID].ID, UID: -1}
		for _, l := range listeners {
			if c.holds(l) {
				t.Listens, t.UID = append(t.Listens, l.Addr.String()), l.UID
				if int(l.Addr.Port()) == c.port && t.Address == "" {
					t.Address = l.Addr.String()
				}
			}
		}
		if len(t.Listens) > 0 {
			targets = append(targets, t)
		}
	}
	return targets
}

// sockets gives the claim its sockets: those remembered of the same
// engine where they may be taken (remembered), else those its descriptors
// show now. A claim whose descriptors are not the exporter's takes its
// user instead; one read in this scan is not read again.
func (s *engineSockets) sockets(proc hostfs.FS, c *engineClaim, remembered bool) {
	if c.read {
		return
	}
	if r, ok := s.byPID[c.w.PID]; ok && remembered && r.w.Kind == c.w.Kind && r.port == c.port {
		c.inodes = r.inodes
		return
	}
	s.walks++
	c.read = true
	inodes, err := workload.SocketInodes(proc, c.w.PID)
	c.inodes, c.uid = inodes, -1
	if errors.Is(err, workload.ErrNotPermitted) {
		if uid, ok := processUID(proc, c.w.PID); ok {
			c.uid = uid
		}
	}
}

// readListeners reads the listeners the claims may hold, and the digest
// of every loopback listener.
func (s *engineSockets) readListeners(proc hostfs.FS, claims []engineClaim) ([]workload.Listener, listenerDigest, error) {
	inodes, uids := map[uint64]bool{}, map[int]bool{}
	for _, c := range claims {
		for i := range c.inodes {
			inodes[i] = true
		}
		if c.inodes == nil && c.uid >= 0 {
			uids[c.uid] = true
		}
	}
	var digest listenerDigest
	listeners, err := workload.ReadListeners(proc, s.diag, func(l workload.Listener) bool {
		digest.add(s.seed, l)
		return inodes[l.Inode] || uids[l.UID]
	})
	return listeners, digest, err
}

// readClaims reads each engine's command line for its port.
func readClaims(proc hostfs.FS, engines []workload.Workload) []engineClaim {
	var claims []engineClaim
	var buf []byte
	for _, w := range engines {
		var err error
		if buf, err = proc.ReadFile(strconv.Itoa(w.PID)+"/cmdline", buf); err != nil {
			continue
		}
		ep := workload.EndpointOf(w.Kind, buf)
		if ep.Port == 0 || !ep.Metrics {
			continue
		}
		claims = append(claims, engineClaim{w: w, port: ep.Port, uid: -1})
	}
	// A command line can be megabytes: the buffer is not kept.
	clear(buf)
	return claims
}

// processUID is the user of process pid, from its status.
func processUID(proc hostfs.FS, pid int) (int, bool) {
	status, err := proc.ReadFile(strconv.Itoa(pid)+"/status", nil)
	if err != nil {
		return 0, false
	}
	return workload.ProcessUID(status)
}
