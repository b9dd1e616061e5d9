// Package fakeproc writes /proc trees for tests and benchmarks: each
// process's stat, status, cmdline and comm as a 6.8 kernel writes them, and
// a host's usual mix of processes at any size.
package fakeproc

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Process is a process to write into a /proc tree.
type Process struct {
	PID, PPID int
	Comm      string
	State     byte   // 'S' when zero
	Start     uint64 // starttime, clock ticks after boot
	Argv      []string
	RSSKB     uint64 // VmRSS; none when NoRSS
	NoRSS     bool
	// HideMM writes stat's memory-layout fields as the kernel does for a
	// reader that may not ptrace the process (not root, another user's):
	// 0. Otherwise arg_end - arg_start is the command line's length, as
	// the kernel's are.
	HideMM bool
	// Cgroup is /proc/PID/cgroup's content; none written when empty.
	Cgroup string
	// Sched is /proc/PID/schedstat's content; none written when empty.
	Sched string
}

// Write puts the process's stat, status and cmdline under root, as a
// kernel 6.8 writes them (stat's 52 fields, status's usual lines).
func (p Process) Write(t testing.TB, root string) {
	t.Helper()
	state := p.State
	if state == 0 {
		state = 'S'
	}
	dir := filepath.Join(root, strconv.Itoa(p.PID))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmdline := ""
	if len(p.Argv) > 0 {
		cmdline = strings.Join(p.Argv, "\x00") + "\x00"
	}
	mm := fmt.Sprintf("187650793357312 187650796240932 281474523285200 0 0 0 0 16781312 134234618 0 0 0 17 3 0 0 0 0 0 "+
		"187650796323872 187650796388424 187651099299840 281474523291333 %d 281474523291468 281474523295715",
		281474523291333+len(cmdline))
	if p.HideMM {
		mm = "1 1 0 0 0 0 0 16781312 134234618 0 0 0 17 3 0 0 0 0 0 0 0 0 0 0 0 0"
	}
	stat := fmt.Sprintf("%d (%s) %c %d %d %d 0 -1 4194560 18233 0 12 0 4512 1204 0 0 20 0 12 0 %d 9136275456 %d "+
		"18446744073709551615 %s 0\n",
		p.PID, p.Comm, state, p.PPID, p.PID, p.PPID, p.Start, p.RSSKB/4, mm)
	status := fmt.Sprintf("Name:\t%s\nUmask:\t0022\nState:\t%c (sleeping)\nTgid:\t%d\nNgid:\t0\nPid:\t%d\nPPid:\t%d\n"+
		"TracerPid:\t0\nUid:\t1000\t1000\t1000\t1000\nGid:\t1000\t1000\t1000\t1000\nFDSize:\t256\n",
		p.Comm, state, p.PID, p.PID, p.PPID)
	if !p.NoRSS {
		status += fmt.Sprintf("VmPeak:\t 9136275 kB\nVmSize:\t 8922144 kB\nVmLck:\t       0 kB\nVmHWM:\t %8d kB\n"+
			"VmRSS:\t %8d kB\nRssAnon:\t %8d kB\nRssFile:\t  204800 kB\nVmSwap:\t       0 kB\n", p.RSSKB, p.RSSKB, p.RSSKB)
	}
	status += "Threads:\t12\nSigQ:\t0/491123\nvoluntary_ctxt_switches:\t1204\nnonvoluntary_ctxt_switches:\t31\n"
	files := map[string]string{"stat": stat, "status": status, "cmdline": cmdline, "comm": p.Comm + "\n"}
	if p.Cgroup != "" {
		files["cgroup"] = p.Cgroup
	}
	if p.Sched != "" {
		files["schedstat"] = p.Sched
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o444); err != nil {
			t.Fatal(err)
		}
	}
}

// WriteTree writes procs into a new temporary directory and returns it.
func WriteTree(t testing.TB, procs ...Process) string {
	t.Helper()
	root := t.TempDir()
	for _, p := range procs {
		p.Write(t, root)
	}
	return root
}

// A host's usual processes, none of them a workload.
var (
	Init      = Process{PID: 1, PPID: 0, Comm: "systemd", Start: 2, Argv: []string{"/sbin/init", "splash"}, RSSKB: 13312}
	Kthreadd  = Process{PID: 2, PPID: 0, Comm: "kthreadd", Start: 2, NoRSS: true}
	Kworker   = Process{PID: 87, PPID: 2, Comm: "kworker/3:1-events", State: 'I', Start: 40, NoRSS: true}
	LoginBash = Process{PID: 1987, PPID: 1, Comm: "bash", Start: 4800011, Argv: []string{"-bash"}, RSSKB: 5376}
)

// Workloads' processes: a vLLM server with its engine core and resource
// tracker, and a trainer under accelerate launch. The server's command
// line holds an API key, as real ones do.
var (
	VLLMServer = Process{PID: 2101, PPID: 1987, Comm: "vllm", Start: 4817734, RSSKB: 3 << 20,
		Argv: []string{"/home/spark/.venv/bin/python3", "/home/spark/.venv/bin/vllm", "serve", "Qwen/Qwen3-32B-AWQ",
			"--gpu-memory-utilization", "0.4", "--api-key", "sk-test-0123456789"}}
	EngineCore      = Process{PID: 2140, PPID: 2101, Comm: "VLLM::EngineCor", Start: 4818950, RSSKB: 40 << 20, Argv: []string{"VLLM::EngineCore"}}
	ResourceTracker = Process{PID: 2139, PPID: 2101, Comm: "python3", Start: 4818902, RSSKB: 24 << 10,
		Argv: []string{"/home/spark/.venv/bin/python3", "-c", "from multiprocessing.resource_tracker import main;main(25)"}}
	Accelerate = Process{PID: 2301, PPID: 1987, Comm: "accelerate", Start: 4902210, RSSKB: 512 << 10,
		Argv: []string{"/home/spark/.venv/bin/python3", "/home/spark/.venv/bin/accelerate", "launch", "--num_processes", "1",
			"-m", "trl.scripts.sft", "--model_name_or_path", "Qwen/Qwen3-8B", "--use_peft"}}
	Trainer = Process{PID: 2302, PPID: 2301, Comm: "python3", Start: 4902390, RSSKB: 22 << 20,
		Argv: []string{"/home/spark/.venv/bin/python3", "-m", "trl.scripts.sft", "--model_name_or_path", "Qwen/Qwen3-8B", "--use_peft"}}
)

// Busy returns n processes (at least the four of every host): a host's
// usual ones, then, per 50 pids, one vLLM server and one accelerate
// launch, each with two children, a third of the rest kernel threads and
// the others ordinary processes.
func Busy(n int) []Process {
	procs := []Process{Init, Kthreadd, Kworker, LoginBash}
	for pid := 10000; len(procs) < n; pid++ {
		p := Process{PID: pid, PPID: 1, Comm: "sshd", Start: uint64(pid) * 7, RSSKB: 6144,
			Argv: []string{"sshd: spark@pts/0"}}
		switch {
		case pid%50 == 0:
			p.Comm, p.Argv = "vllm", VLLMServer.Argv
		case pid%50 == 25:
			p.Comm, p.Argv = "accelerate", Accelerate.Argv
		case pid%50 == 1 || pid%50 == 26:
			p.PPID, p.Comm, p.Argv = pid-1, "python3", Trainer.Argv
		case pid%50 == 2 || pid%50 == 27:
			p.PPID, p.Comm, p.Argv = pid-2, "python3", ResourceTracker.Argv
		case pid%3 == 0:
			p.PPID, p.Comm, p.Argv, p.NoRSS = 2, "kworker/u16:3", nil, true
		}
		procs = append(procs, p)
	}
	return procs
}

// Listen gives process pid of the tree at root a socket listening at
// 127.0.0.1:port, as the kernel shows one: a descriptor in PID/fd linking
// to socket:[INODE], and that inode's LISTEN entry in net/tcp, owned by
// uid 1000 as the tree's processes are.
func Listen(t testing.TB, root string, pid, port int) {
	t.Helper()
	fds := filepath.Join(root, strconv.Itoa(pid), "fd")
	if err := os.MkdirAll(fds, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(fds)
	if err != nil {
		t.Fatal(err)
	}
	inode := 400000 + port
	fd := 3 + len(entries) // the lowest free number past those Unlisten left
	for ; ; fd++ {
		if _, err := os.Lstat(filepath.Join(fds, strconv.Itoa(fd))); os.IsNotExist(err) {
			break
		}
	}
	if err := os.Symlink(fmt.Sprintf("socket:[%d]", inode), filepath.Join(fds, strconv.Itoa(fd))); err != nil {
		t.Fatal(err)
	}
	tcp := filepath.Join(root, "net", "tcp")
	if err := os.MkdirAll(filepath.Dir(tcp), 0o755); err != nil {
		t.Fatal(err)
	}
	old, err := os.ReadFile(tcp)
	if os.IsNotExist(err) {
		old, err = []byte("  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"), nil
	}
	if err != nil {
		t.Fatal(err)
	}
	line := fmt.Sprintf("%4d: 0100007F:%04X 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 %d 1 0000000000000000 100 0 0 10 0\n",
		bytes.Count(old, []byte("\n"))-1, port, inode)
	if err := os.WriteFile(tcp, append(old, line...), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Unlisten closes what Listen opened: process pid's descriptor of the
// socket at port, and the socket's LISTEN entry.
func Unlisten(t testing.TB, root string, pid, port int) {
	t.Helper()
	socket := fmt.Sprintf("socket:[%d]", 400000+port)
	fds := filepath.Join(root, strconv.Itoa(pid), "fd")
	entries, err := os.ReadDir(fds)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if link, err := os.Readlink(filepath.Join(fds, e.Name())); err == nil && link == socket {
			if err := os.Remove(filepath.Join(fds, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
	}
	tcp := filepath.Join(root, "net", "tcp")
	old, err := os.ReadFile(tcp)
	if err != nil {
		t.Fatal(err)
	}
	var kept []byte
	for line := range bytes.Lines(old) {
		if !bytes.Contains(line, []byte(fmt.Sprintf(" %d ", 400000+port))) {
			kept = append(kept, line...)
		}
	}
	if err := os.WriteFile(tcp, kept, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Cgroup is a cgroup v2 directory to write into a cgroup tree: its
// cgroup.type, cpu.stat (as a kernel writes it without the cpu controller)
// and cgroup.procs.
type Cgroup struct {
	Path      string // "/user.slice/session-2.scope"
	UsageUsec uint64
	PIDs      []int
	Type      string // "domain" when empty
}

// Write puts the cgroup's files under root, rewriting them in place: a file
// held open reads the new content, as a cgroup's does.
func (c Cgroup) Write(t testing.TB, root string) {
	t.Helper()
	dir := filepath.Join(root, filepath.FromSlash(c.Path))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	kind := c.Type
	if kind == "" {
		kind = "domain"
	}
	var procs strings.Builder
	for _, pid := range c.PIDs {
		fmt.Fprintf(&procs, "%d\n", pid)
	}
	files := map[string]string{
		"cgroup.type":  kind + "\n",
		"cgroup.procs": procs.String(),
		"cpu.stat": fmt.Sprintf("usage_usec %d\nuser_usec %d\nsystem_usec %d\nnice_usec 0\n",
			c.UsageUsec, c.UsageUsec/2, c.UsageUsec-c.UsageUsec/2),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Quiet returns Busy(n) idle, as on a quiet host: each process has the
// schedstat every kernel since 2.6.23 with CONFIG_SCHED_INFO (every
// distribution's) writes, "run-time-ns wait-time-ns timeslices", which reads
// the same from one scrape to the next while the process does not run.
func Quiet(n int) []Process {
	procs := Busy(n)
	for i := range procs {
		procs[i].Sched = fmt.Sprintf("%d %d %d\n", 1_000_000+procs[i].PID*7919, 20_000+procs[i].PID*31, 4+procs[i].PID%97)
	}
	return procs
}
