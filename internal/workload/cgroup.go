package workload

import (
	"bytes"
	"context"
	"slices"
	"strconv"
	"strings"

	"github.com/spark-exporter/spark_exporter/internal/hostfs"
)

// cgroup is a cgroup v2 directory that processes the scan knows are in. A
// cgroup's cpu.stat (present whether or not the cpu controller is enabled)
// counts its processes' CPU time: while it reads the same, none of them ran,
// so none exec'd. cgroup.procs tells that none left to run elsewhere.
type cgroup struct {
	path               string
	cpu, procs         hostfs.Kept
	cpuHash, procsHash uint64
	members            int
	// This scan's finding: quiet, none ran; moved, its cgroup.procs
	// changed and pids (sorted) is who is in it now; dead, it is gone.
	quiet, moved, dead bool
	pids               []int
}

// Bounds on what a cgroup's files may hold: a path is at most PATH_MAX,
// and cgroup.procs a million pids.
const (
	maxCgroupPath  = 4096
	maxCgroupProcs = 8 << 20
)

// cgroupRoot finds where cgroup v2 is mounted, in the exporter's own
// mountinfo; "" if nowhere, and the scan reads each process instead.
func cgroupRoot(mountinfo []byte) string {
	for line := range bytes.Lines(mountinfo) {
		pre, post, ok := bytes.Cut(line, []byte(" - "))
		fields := strings.Fields(string(pre))
		if !ok || len(fields) < 5 || !bytes.HasPrefix(post, []byte("cgroup2 ")) {
			continue
		}
		// Another mount's root would need the paths rebased; a mount point
		// with an escaped space is not worth unescaping.
		if root, point := fields[3], fields[4]; root == "/" && strings.HasPrefix(point, "/") && !strings.Contains(point, `\`) {
			return strings.TrimSuffix(point, "/")
		}
	}
	return ""
}

// cgroupPath is the v2 path in /proc/PID/cgroup ("0::/user.slice"), or ""
// where there is none this scan may use: v1 only, outside the exporter's
// cgroup namespace (/..), or odd.
func cgroupPath(data []byte) string {
	for line := range bytes.Lines(data) {
		path, ok := bytes.CutPrefix(bytes.TrimSuffix(line, []byte("\n")), []byte("0::"))
		if !ok {
			continue
		}
		p := string(path)
		if len(p) < 2 || len(p) > maxCgroupPath || p[0] != '/' || strings.ContainsAny(p, "\n\x00") ||
			slices.ContainsFunc(strings.Split(p[1:], "/"), func(c string) bool { return c == "" || c == "." || c == ".." }) {
			return ""
		}
		return p
	}
	return ""
}

// tryCgroup looks for the cgroup of a user process not looked for yet.
func (s *Scanner) tryCgroup(ctx context.Context, pid int, k *known) {
	if !k.tried && !k.kernel {
		s.joinCgroup(ctx, pid, k)
	}
}

// joinCgroup notes the process in the cgroup it is in now, opening the
// cgroup's files if no process known was in it.
func (s *Scanner) joinCgroup(ctx context.Context, pid int, k *known) {
	s.leaveCgroup(k)
	k.tried = true
	if s.cgroupRoot == "" || s.held+3 > s.maxHeld {
		return
	}
	var err error
	s.buf, err = s.proc.Read(ctx, pid, "cgroup", s.buf)
	path := ""
	if err == nil {
		path = cgroupPath(s.buf)
	}
	if path == "" {
		return
	}
	g := s.cgroups[path]
	if g == nil {
		if g = s.openCgroup(ctx, path); g == nil {
			return
		}
		s.cgroups[path] = g
	}
	g.members++
	k.cg, k.joined = g, s.scans
}

// openCgroup opens a domain cgroup's files: a threaded one's processes may
// have threads in others.
func (s *Scanner) openCgroup(ctx context.Context, path string) *cgroup {
	dir := s.cgroupRoot + path + "/"
	kind, data, err := s.proc.KeepFile(ctx, dir+"cgroup.type", 64, s.buf)
	kind.Close()
	if err != nil || string(data) != "domain\n" {
		return nil
	}
	g := &cgroup{path: path}
	var cpu, procs []byte
	if g.cpu, cpu, err = s.proc.KeepFile(ctx, dir+"cpu.stat", 4096, s.buf); err == nil {
		g.cpuHash = hashCmdline(cpu)
		g.procs, procs, err = s.proc.KeepFile(ctx, dir+"cgroup.procs", maxCgroupProcs, s.buf)
		g.procsHash = hashCmdline(procs)
	}
	if err != nil {
		g.cpu.Close()
		g.procs.Close()
		return nil
	}
	s.held += 2
	return g
}

// leaveCgroup forgets the process's cgroup, closing its files once no
// process known is in it.
func (s *Scanner) leaveCgroup(k *known) {
	g := k.cg
	if g == nil {
		return
	}
	k.cg = nil
	if g.members--; g.members == 0 {
		s.dropCgroup(g)
	}
}

func (s *Scanner) dropCgroup(g *cgroup) {
	if g.dead {
		return
	}
	g.dead, g.quiet = true, false
	g.cpu.Close()
	g.procs.Close()
	s.held -= 2
	delete(s.cgroups, g.path)
}

// checkCgroups reads each cgroup's cpu.stat, and the cgroup.procs of those
// whose cpu.stat is as it was; before the listing, so that whatever a
// process does after it shows in the next scan's.
func (s *Scanner) checkCgroups(ctx context.Context) error {
	if len(s.cgroups) == 0 {
		return nil
	}
	gs, kept := s.cgList[:0], s.kept[:0]
	for _, g := range s.cgroups {
		g.quiet, g.moved = false, false
		gs, kept = append(gs, g), append(kept, g.cpu)
	}
	defer func() { clear(gs); s.cgList = gs[:0] }()
	stats, err := s.proc.ReadKept(ctx, kept)
	if err != nil {
		return err
	}
	still, kept := gs[:0], kept[:0]
	for i, stat := range stats {
		g := gs[i]
		if stat.Err != nil {
			s.dropCgroup(g) // removed, so none of its processes is left in it
			continue
		}
		h := hashCmdline(stat.Data)
		if h == g.cpuHash {
			still, kept = append(still, g), append(kept, g.procs)
		}
		g.cpuHash = h
	}
	procs, err := s.proc.ReadKept(ctx, kept)
	clear(kept)
	if err != nil {
		return err
	}
	for i, f := range procs {
		s.sawProcs(still[i], f)
	}
	return nil
}

// sawProcs takes the cgroup.procs of a cgroup whose processes did not run.
func (s *Scanner) sawProcs(g *cgroup, f hostfs.File) {
	if f.Err != nil {
		s.dropCgroup(g)
		return
	}
	h := hashCmdline(f.Data)
	g.quiet = true
	if h != g.procsHash {
		g.moved, g.pids = true, parsePids(g.pids[:0], f.Data)
	}
	g.procsHash = h
}

// parsePids reads cgroup.procs, a pid a line, sorted; a line that is not
// a pid is left out, as is whatever process it was.
func parsePids(pids []int, data []byte) []int {
	for line := range bytes.Lines(data) {
		if pid, err := strconv.Atoi(string(bytes.TrimSuffix(line, []byte("\n")))); err == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids)
	return pids
}

// stayed tells whether the process is as it was: its cgroup ran none of
// its processes since a scan that read the process, it is still in it,
// and its parent is the one it had.
func (s *Scanner) stayed(pid int, k *known) bool {
	g := k.cg
	if g == nil || !g.quiet || k.joined+1 >= s.scans || s.parentIno(k.ppid) != k.parentIno {
		return false
	}
	if g.moved {
		_, in := slices.BinarySearch(g.pids, pid)
		return in
	}
	return true
}

// strayed tells whether the process left the cgroup it was noted in.
func strayed(pid int, k *known) bool {
	g := k.cg
	if g == nil {
		return false
	}
	if g.dead || !g.moved {
		return g.dead
	}
	_, in := slices.BinarySearch(g.pids, pid)
	return !in
}
