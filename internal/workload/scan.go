package workload

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"slices"
	"sync"
	"syscall"

	"github.com/spark-exporter/spark_exporter/internal/hostfs"
	"github.com/spark-exporter/spark_exporter/internal/redact"
)

// Workload is one program found in /proc, with everything it started.
type Workload struct {
	// PID is the topmost process of the program (vllm serve, torchrun).
	PID int
	Identity
	// ResidentBytes is VmRSS summed over the process and its descendants.
	ResidentBytes uint64
}

// Problem is a note about a process, for a debug log line. It names the
// process by pid and kind only.
type Problem struct {
	PID  int
	Kind string
	What string
}

// Result is one scan of /proc.
type Result struct {
	Workloads []Workload
	// Unreadable counts processes that could not be read (hidepid=1,
	// permissions) or held impossible figures: detection may miss them.
	Unreadable int
	// Problems of workloads, each reported once in a process's life.
	Problems []Problem
}

// procFiles is the /proc tree as a scan reads it; hostfs.Processes is one,
// the tests read trees through an fs.FS.
type procFiles interface {
	List(ctx context.Context, ps []hostfs.Process) ([]hostfs.Process, error)
	// Read reads into buf[:0], grown as needed.
	Read(ctx context.Context, pid int, name string, buf []byte) ([]byte, error)
	// ReadAll reads one batch under one deadline: files[i] is what was read
	// of ps[i], or why not. A read that blocks fails it.
	ReadAll(ctx context.Context, ps []hostfs.Process, name string) ([]hostfs.File, error)
	// KeepRunTime holds what tells whether a process ran, to be read
	// again with ReadKept: a file only when open.
	KeepRunTime(ctx context.Context, pid int, open bool, buf []byte) (hostfs.Kept, []byte, error)
	// KeepFile opens a file outside the tree (a cgroup's) as Keep does.
	KeepFile(ctx context.Context, path string, limit int, buf []byte) (hostfs.Kept, []byte, error)
	ReadKept(ctx context.Context, ks []hostfs.Kept) ([]hostfs.File, error)
	Close() error
}

// Scanner finds workloads in a /proc tree. It remembers each process by pid
// and start time, so that a command line is classified once in a process's
// life rather than on every scrape. An exec keeps pid, start time and often
// comm (python3 → python3 -m vllm serve), but changes stat's arg_start and
// arg_end where the kernel shows them (to root or the owner); where they are
// hidden, the command line is reread at every scan and compared by a hash.
// It is safe for concurrent use; scans run one at a time.
type Scanner struct {
	proc     procFiles
	patterns []Pattern

	mu    sync.Mutex
	known map[int]known
	scans uint64
	// Kept from one scan to the next, so that a scan allocates little.
	entries []hostfs.Process
	nodes   []Node
	// buf is what the scan under way reads each file into.
	buf []byte
	// Batches of stat and status reads; owners[i] is the workload of
	// members[i].
	rereads, members []hostfs.Process
	owners           []*Workload
	// Command lines to compare, and their nodes' indexes.
	checks     []hostfs.Process
	checkNodes []int
	// rechecks counts the processes this scan marked recheck.
	rechecks int
	// Processes whose schedstat is read again, and the files.
	steady []hostfs.Process
	kept   []hostfs.Kept
	// held counts the schedstat files kept open, at most maxHeld: an
	// eighth of the descriptor limit, and no more than 4,096.
	held, maxHeld int
	// cgroupRoot is where cgroup v2 is mounted, "" if not; cgroups are
	// those of the processes known, by path.
	cgroupRoot string
	cgroups    map[string]*cgroup
	cgList     []*cgroup
}

// known is what is remembered of a process: never its command line.
type known struct {
	startTime uint64
	// A change of comm, arg_start or arg_end has the command line reread.
	comm             string
	argStart, argEnd uint64
	// cmdline is the hash of the command line classified.
	cmdline  uint64
	identity *Identity
	// recheck: the stat shows no change, so the command line is compared.
	recheck bool
	// scan is the last scan that saw the process.
	scan uint64
	// reported: its problem, if any, has been handed out.
	reported bool

	// A kernel thread (kthreadd, pid 2, and its children) never execs,
	// changes parent or becomes a workload: while its /proc directory is the
	// same (ino), its stat is not read again. Most processes are such.
	kernel bool
	ino    uint64
	ppid   int

	// sched is the process's run time held (its CPU-time clock, or its
	// schedstat open), and the hash of what it last read. The run time
	// grows with anything the process does, an exec included: while it
	// reads the same, so do stat and the command line, but for the parent
	// (parentIno), which is checked apart.
	sched     hostfs.Kept
	schedHash uint64
	parentIno uint64
	matched   bool

	// cg is the cgroup it was in at the scan joined; tried, whether its
	// cgroup was looked for. A process is first looked for the second time
	// it is seen: most that live shorter never are.
	cg     *cgroup
	joined uint64
	tried  bool
}

// NewScanner scans the /proc tree proc (--path.procfs).
func NewScanner(proc hostfs.FS, patterns []Pattern) *Scanner {
	s := newScanner(proc.Processes(), patterns)
	if mountinfo, err := proc.ReadFile("self/mountinfo", nil); err == nil {
		s.cgroupRoot = cgroupRoot(mountinfo)
	}
	return s
}

func newScanner(proc procFiles, patterns []Pattern) *Scanner {
	return &Scanner{proc: proc, patterns: patterns, known: map[int]known{}, maxHeld: hostfs.DescriptorShare(8, 4096),
		cgroups: map[string]*cgroup{}}
}

// Scan lists the processes and groups them into workloads. Only a failure to
// list /proc is an error; a process that cannot be read is counted in
// Unreadable. ctx's deadline bounds the scan's reads.
func (s *Scanner) Scan(ctx context.Context) (Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	res, err := s.scan(ctx)
	// A command line of megabytes would pin as much in a kept buffer.
	s.buf = nil
	if err != nil {
		// Its processes were not all read: the next scan may not take a
		// cgroup that reads as in this one as quiet.
		for _, g := range s.cgroups {
			g.cpuHash = 0
		}
		return Result{}, err
	}
	return res, nil
}

// tally is one scan's processes as they are read.
type tally struct {
	res   Result
	nodes []Node
	// blind: processes counted unreadable, whose memory is not read either.
	blind map[int]bool
}

// add counts a process read: present in the tree, or unreadable.
func (t *tally) add(pid int, n Node, present bool, err error) error {
	if errors.Is(err, hostfs.ErrBlocked) {
		// A process stuck in the kernel holds its files: fail at once
		// rather than wait on each of its files in turn.
		return err
	}
	if outOfDescriptors(err) {
		// The exporter, not the process, is short: fail rather than
		// count the process unreadable (and its workloads gone).
		return fmt.Errorf("reading processes: %w", redact.WithoutPath(err))
	}
	if err != nil {
		t.res.Unreadable++
		if t.blind == nil {
			t.blind = map[int]bool{}
		}
		t.blind[pid] = true
	}
	if present {
		t.nodes = append(t.nodes, n)
	}
	return nil
}

func (s *Scanner) scan(ctx context.Context) (Result, error) {
	s.scans++
	s.rechecks = 0
	if err := s.checkCgroups(ctx); err != nil {
		return Result{}, err
	}
	var err error
	s.entries, err = s.proc.List(ctx, s.entries[:0])
	if err != nil {
		// A listing that blocked is still filling the slice given.
		s.entries = nil
		return Result{}, fmt.Errorf("listing processes: %w", redact.WithoutPath(err))
	}
	if !slices.IsSortedFunc(s.entries, byPID) {
		slices.SortFunc(s.entries, byPID)
	}
	t := &tally{nodes: s.nodes[:0]}
	// The stat of each process seen before is reread with the others' in
	// one batch; one new now may be gone by the next scan.
	rereads, err := s.triage(ctx, t)
	if err == nil {
		rereads, err = s.unchanged(ctx, t, rereads)
	}
	if err == nil {
		err = s.reread(ctx, t, rereads)
	}
	if err == nil {
		err = s.recheck(ctx, t.nodes)
	}
	if err != nil {
		return Result{}, err
	}
	s.nodes = t.nodes
	s.forget()
	if err := s.group(ctx, t.nodes, t.blind, &t.res); err != nil {
		return Result{}, err
	}
	return t.res, nil
}

func byPID(a, b hostfs.Process) int { return a.PID - b.PID }

// triage reads each new process, and sorts those seen before into the
// ones whose schedstat is held (s.steady) and the others (rereads).
func (s *Scanner) triage(ctx context.Context, t *tally) (rereads []hostfs.Process, _ error) {
	rereads, s.steady, s.kept = s.rereads[:0], s.steady[:0], s.kept[:0]
	for _, e := range s.entries {
		k, seen := s.known[e.PID]
		if seen && !k.kernel && e.Ino != 0 && e.Ino == k.ino {
			if s.stayed(e.PID, &k) {
				k.scan, k.recheck = s.scans, false
				s.known[e.PID] = k
				t.nodes = append(t.nodes, Node{PID: e.PID, PPID: k.ppid, Matched: k.matched})
				continue
			}
			if strayed(e.PID, &k) {
				s.joinCgroup(ctx, e.PID, &k)
				s.known[e.PID] = k
			}
		}
		switch {
		case seen && k.kernel && e.Ino != 0 && e.Ino == k.ino:
		case seen && k.sched.Held() && e.Ino != 0 && e.Ino == k.ino:
			s.steady, s.kept = append(s.steady, e), append(s.kept, k.sched)
			continue
		case seen && !k.sched.Held():
			rereads = append(rereads, e)
			continue
		}
		n, present, err := s.process(ctx, e)
		if err := t.add(e.PID, n, present, err); err != nil {
			return nil, err
		}
	}
	s.rereads = rereads
	return rereads, nil
}

// unchanged rereads the held schedstat files: a process whose file reads
// the same, and whose parent is the one it had, is as it was. The others
// join rereads.
func (s *Scanner) unchanged(ctx context.Context, t *tally, rereads []hostfs.Process) ([]hostfs.Process, error) {
	if len(s.kept) == 0 {
		return rereads, nil
	}
	scheds, err := s.proc.ReadKept(ctx, s.kept)
	clear(s.kept)
	if err != nil {
		return nil, err
	}
	for i, sched := range scheds {
		e := s.steady[i]
		k := s.known[e.PID]
		if sched.Err != nil {
			// Exited, whoever has its pid now.
			s.release(&k)
		}
		h := hashCmdline(sched.Data)
		if sched.Err != nil || h != k.schedHash || s.parentIno(k.ppid) != k.parentIno {
			k.schedHash = h
			s.known[e.PID] = k
			rereads = append(rereads, e)
			continue
		}
		k.scan, k.recheck = s.scans, false
		s.tryCgroup(ctx, e.PID, &k)
		s.known[e.PID] = k
		t.nodes = append(t.nodes, Node{PID: e.PID, PPID: k.ppid, Matched: k.matched})
	}
	s.rereads = rereads
	return rereads, nil
}

// reread reads the stat of the processes in rereads in one batch.
func (s *Scanner) reread(ctx context.Context, t *tally, rereads []hostfs.Process) error {
	stats, err := s.proc.ReadAll(ctx, rereads, "stat")
	if err != nil {
		return err
	}
	for i, stat := range stats {
		n, present, err := s.classify(ctx, rereads[i], stat.Data, stat.Err)
		if err := t.add(rereads[i].PID, n, present, err); err != nil {
			return err
		}
	}
	return nil
}

// parentIno is the inode of the listed process pid, 0 if it is not listed.
func (s *Scanner) parentIno(pid int) uint64 {
	if i, ok := slices.BinarySearchFunc(s.entries, pid, func(e hostfs.Process, pid int) int { return e.PID - pid }); ok {
		return s.entries[i].Ino
	}
	return 0
}

// forget drops the processes this scan did not see.
func (s *Scanner) forget() {
	for pid, k := range s.known {
		if k.scan != s.scans {
			s.release(&k)
			s.leaveCgroup(&k)
			delete(s.known, pid)
		}
	}
}

// release lets the process's run time go, closing its schedstat if held.
func (s *Scanner) release(k *known) {
	if k.sched.HoldsFile() {
		s.held--
	}
	k.sched.Close()
	k.sched = hostfs.Kept{}
}

// recheck rereads the command lines of the processes whose stat hides
// arg_start, to find an exec that kept the comm.
func (s *Scanner) recheck(ctx context.Context, nodes []Node) error {
	if s.rechecks == 0 {
		// Every stat showed arg_start (the exporter runs as root).
		return nil
	}
	s.rechecks = 0
	checks, at := s.checks[:0], s.checkNodes[:0]
	for i, n := range nodes {
		if k := s.known[n.PID]; k.recheck {
			checks = append(checks, hostfs.Process{PID: n.PID, Ino: k.ino})
			at = append(at, i)
		}
	}
	s.checks, s.checkNodes = checks, at
	cmdlines, err := s.proc.ReadAll(ctx, checks, "cmdline")
	if err != nil {
		return err
	}
	for i, cmdline := range cmdlines {
		if outOfDescriptors(cmdline.Err) {
			return fmt.Errorf("reading processes: %w", redact.WithoutPath(cmdline.Err))
		}
		// A process gone since its stat, or whose command line cannot be
		// read now, keeps what it was classified as for this scan.
		if cmdline.Err != nil || len(cmdline.Data) == 0 {
			continue
		}
		pid := checks[i].PID
		k := s.known[pid]
		if h := hashCmdline(cmdline.Data); h != k.cmdline {
			k.cmdline, k.identity = h, s.classifyCmdline(cmdline.Data, k.comm)
			k.matched = k.identity != nil
			s.known[pid] = k
			nodes[at[i]].Matched = k.matched
		}
	}
	return nil
}

func (s *Scanner) classifyCmdline(cmdline []byte, comm string) *Identity {
	if id, ok := identify(Command{Argv: splitCmdline(cmdline), Comm: comm}, s.patterns); ok {
		return &id
	}
	return nil
}

// hashCmdline is FNV-1a, 64 bits, of a command line: to tell that it
// changed, not to resist one made to collide.
func hashCmdline(data []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range data {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}

// group makes one workload of each matched process that has no matched
// ancestor, and sums the memory of its tree.
func (s *Scanner) group(ctx context.Context, nodes []Node, blind map[int]bool, res *Result) error {
	owners := ownerPIDs(nodes)
	for i, n := range nodes {
		if owners[i] != n.PID {
			continue
		}
		k := s.known[n.PID]
		res.Workloads = append(res.Workloads, Workload{PID: n.PID, Identity: *k.identity})
		// Only a workload's own problem is told: an engine core's missing
		// cap does not matter once its server is found.
		if problem := k.identity.Cap.Problem; problem != "" && !k.reported {
			res.Problems = append(res.Problems, Problem{PID: n.PID, Kind: k.identity.Kind, What: problem})
			k.reported = true
			s.known[n.PID] = k
		}
	}
	byPID := make(map[int]*Workload, len(res.Workloads))
	for i := range res.Workloads {
		byPID[res.Workloads[i].PID] = &res.Workloads[i]
	}
	members, ws := s.members[:0], s.owners[:0]
	for i, n := range nodes {
		w := byPID[owners[i]]
		if w == nil || blind[n.PID] {
			continue
		}
		members = append(members, hostfs.Process{PID: n.PID, Ino: s.known[n.PID].ino})
		ws = append(ws, w)
	}
	statuses, err := s.proc.ReadAll(ctx, members, "status")
	defer func() {
		clear(ws) // no pointer into this scan's result is kept
		s.members, s.owners = members, ws[:0]
	}()
	if err != nil {
		return err
	}
	for i, status := range statuses {
		if gone(status.Err) {
			continue
		}
		if outOfDescriptors(status.Err) {
			return fmt.Errorf("reading processes: %w", redact.WithoutPath(status.Err))
		}
		rss, err := uint64(0), status.Err
		if err == nil {
			rss, _, err = parseVmRSS(status.Data)
		}
		w := ws[i]
		if err != nil || rss > math.MaxUint64-w.ResidentBytes {
			// A sum beyond 64 bits is no memory this machine has: the
			// figures are corrupt, and are left out like unreadable ones.
			res.Unreadable++
			continue
		}
		w.ResidentBytes += rss
	}
	slices.SortFunc(res.Workloads, func(a, b Workload) int { return a.PID - b.PID })
	return nil
}

// process reads one process's stat, and its command line if it is new.
// present is false when the process has gone or its stat is unreadable; one
// whose command line is unreadable is present, and read again next scan.
func (s *Scanner) process(ctx context.Context, e hostfs.Process) (Node, bool, error) {
	pid := e.PID
	k, seen := s.known[pid]
	if seen && k.kernel && e.Ino != 0 && e.Ino == k.ino {
		k.scan = s.scans
		s.known[pid] = k
		return Node{PID: pid, PPID: k.ppid}, true, nil
	}

	if seen && k.sched.Held() {
		// Its directory changed: another process has the pid.
		s.release(&k)
		s.known[pid] = k
	}
	sched, hash := s.keep(ctx, pid)
	var err error
	s.buf, err = s.proc.Read(ctx, pid, "stat", s.buf)
	n, present, err := s.classify(ctx, e, s.buf, err)
	if k, ok := s.known[pid]; ok && k.scan == s.scans && !k.kernel && sched.Held() {
		k.sched, k.schedHash = sched, hash
		s.known[pid] = k
	} else if sched.Held() {
		s.release(&known{sched: sched})
	}
	return n, present, err
}

// keep holds the run time of a process about to be read (a schedstat
// opened only while fewer than maxHeld are): read before its stat, so that
// a change after the stat read shows in the next scan's.
func (s *Scanner) keep(ctx context.Context, pid int) (hostfs.Kept, uint64) {
	sched, data, err := s.proc.KeepRunTime(ctx, pid, s.held < s.maxHeld, s.buf)
	if err != nil || !sched.Held() {
		sched.Close()
		return hostfs.Kept{}, 0
	}
	if sched.HoldsFile() {
		s.held++
	}
	return sched, hashCmdline(data)
}

// classify goes on from a process's stat, as read (or why not), reading the
// command line of a process new or changed.
func (s *Scanner) classify(ctx context.Context, e hostfs.Process, stat []byte, err error) (n Node, present bool, _ error) {
	pid := e.PID
	k, seen := s.known[pid]
	if gone(err) || (err == nil && len(stat) == 0) {
		return Node{}, false, nil
	}
	if err != nil {
		return Node{}, false, err
	}
	st, err := parseStat(stat)
	if err != nil {
		return Node{}, false, err
	}
	n = Node{PID: pid, PPID: st.PPID}

	// Comparing comm to the one remembered allocates nothing; only a new
	// one is copied out of the buffer that the next read reuses.
	kernel := pid == 2 || st.PPID == 2
	zombie := st.State == 'Z' || st.State == 'X'
	changed := !seen || k.startTime != st.StartTime || k.comm != string(st.Comm) ||
		k.argStart != st.ArgStart || k.argEnd != st.ArgEnd
	// Another process with the pid is in a cgroup of its own.
	again := seen && k.ino == e.Ino && k.startTime == st.StartTime
	if changed {
		k = known{startTime: st.StartTime, comm: string(st.Comm), argStart: st.ArgStart, argEnd: st.ArgEnd,
			sched: k.sched, schedHash: k.schedHash, cg: k.cg, joined: k.joined, tried: k.tried}
		if !kernel {
			s.buf, err = s.proc.Read(ctx, pid, "cmdline", s.buf)
			if gone(err) {
				return Node{}, false, nil
			}
			if err != nil {
				return n, true, err
			}
			k.cmdline, k.identity = hashCmdline(s.buf), s.classifyCmdline(s.buf, k.comm)
		}
	}
	// A zombie's command line is empty: there is nothing to compare.
	k.recheck = !changed && !kernel && !zombie && st.ArgStart == 0
	if k.recheck {
		s.rechecks++
	}
	k.scan = s.scans
	k.kernel, k.ino, k.ppid, k.parentIno = kernel, e.Ino, st.PPID, s.parentIno(st.PPID)
	// A zombie has exited: it still links its children to the tree, but
	// holds no memory and is no workload of its own.
	n.Matched = k.identity != nil && !zombie
	k.matched = n.Matched
	if !again {
		s.leaveCgroup(&k)
		k.tried = false
	} else if !zombie {
		s.tryCgroup(ctx, pid, &k)
	}
	s.known[pid] = k
	return n, true, nil
}

// Close releases the files the scanner keeps open between scans.
func (s *Scanner) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range s.known {
		s.release(&k)
		s.leaveCgroup(&k)
	}
	clear(s.known)
	return s.proc.Close()
}

// gone tells whether a read failed because the process exited meanwhile:
// its directory vanished, or the kernel answers ESRCH for a dead task.
func gone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH)
}

// outOfDescriptors tells whether err is the process or the system out of
// file descriptors, which says nothing of the file.
func outOfDescriptors(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}
