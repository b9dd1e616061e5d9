package collector

import (
	"errors"
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
}

// engineTargets are the engines among the workloads where each serves its
// metrics: the port its command line names (the command line is read for
// it and dropped), asked only at a listener its own process holds.
// Where the exporter may not read the process's descriptors (another
// user's, without CAP_SYS_PTRACE), a listener of the process's user is
// taken for its own: the kernel lets one user's processes ptrace one
// another, so no finer line is drawn for them.
func engineTargets(proc hostfs.FS, engines []workload.Workload, refs map[int]container.Ref) []engine.Target {
	claims := readClaims(proc, engines)
	if len(claims) == 0 {
		return nil
	}
	inodes, uids := map[uint64]bool{}, map[int]bool{}
	for _, c := range claims {
		for i := range c.inodes {
			inodes[i] = true
		}
		if c.inodes == nil {
			uids[c.uid] = true
		}
	}
	listeners, err := workload.ReadListeners(proc, func(l workload.Listener) bool { return inodes[l.Inode] || uids[l.UID] })
	if err != nil {
		return nil
	}
	var targets []engine.Target
	for _, c := range claims {
		t := engine.Target{PID: c.w.PID, Kind: c.w.Kind, Container: refs[c.w.PID].ID, UID: -1}
		for _, l := range listeners {
			if c.inodes[l.Inode] || (c.inodes == nil && c.uid == l.UID) {
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

// readClaims reads each engine's command line for its port, and its
// sockets (or user).
func readClaims(proc hostfs.FS, engines []workload.Workload) []engineClaim {
	var claims []engineClaim
	var buf []byte
	for _, w := range engines {
		pid := strconv.Itoa(w.PID)
		var err error
		if buf, err = proc.ReadFile(pid+"/cmdline", buf); err != nil {
			continue
		}
		ep := workload.EndpointOf(w.Kind, buf)
		if ep.Port == 0 || !ep.Metrics {
			continue
		}
		c := engineClaim{w: w, port: ep.Port}
		c.inodes, err = workload.SocketInodes(proc, w.PID)
		if errors.Is(err, workload.ErrNotPermitted) {
			var ok bool
			if buf, err = proc.ReadFile(pid+"/status", buf); err != nil {
				continue
			}
			if c.uid, ok = workload.ProcessUID(buf); !ok {
				continue
			}
		} else if err != nil {
			continue
		}
		claims = append(claims, c)
	}
	// A command line can be megabytes: the buffer is not kept.
	clear(buf)
	return claims
}
