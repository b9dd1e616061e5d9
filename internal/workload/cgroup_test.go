package workload

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/spark-exporter/spark_exporter/internal/hostfs"
	"github.com/spark-exporter/spark_exporter/internal/testing/fakeproc"
)

// countedFiles counts what the scan reads of each process ("2600/stat",
// "2600/schedstat") and of the cgroups ("cpu.stat"), and fails the reads of
// a cgroup removed, as the kernel does (ENODEV).
type countedFiles struct {
	procFiles
	reads   map[string]int
	names   map[hostfs.Kept]string
	paths   map[hostfs.Kept]string
	removed string
}

func countFiles(root string) *countedFiles {
	return &countedFiles{procFiles: hostfs.New(root).Processes(), reads: map[string]int{},
		names: map[hostfs.Kept]string{}, paths: map[hostfs.Kept]string{}}
}

func (c *countedFiles) Read(ctx context.Context, pid int, name string, buf []byte) ([]byte, error) {
	c.reads[strconv.Itoa(pid)+"/"+name]++
	return c.procFiles.Read(ctx, pid, name, buf)
}

func (c *countedFiles) ReadAll(ctx context.Context, ps []hostfs.Process, name string) ([]hostfs.File, error) {
	for _, p := range ps {
		c.reads[strconv.Itoa(p.PID)+"/"+name]++
	}
	return c.procFiles.ReadAll(ctx, ps, name)
}

func (c *countedFiles) KeepRunTime(ctx context.Context, pid int, open bool, buf []byte) (hostfs.Kept, []byte, error) {
	k, data, err := c.procFiles.KeepRunTime(ctx, pid, open, buf)
	c.names[k] = strconv.Itoa(pid) + "/schedstat"
	return k, data, err
}

func (c *countedFiles) KeepFile(ctx context.Context, path string, limit int, buf []byte) (hostfs.Kept, []byte, error) {
	if c.removed != "" && strings.HasPrefix(path, c.removed) {
		return hostfs.Kept{}, nil, &fs.PathError{Op: "open", Path: path, Err: syscall.ENOENT}
	}
	k, data, err := c.procFiles.KeepFile(ctx, path, limit, buf)
	c.names[k], c.paths[k] = filepath.Base(path), path
	return k, data, err
}

func (c *countedFiles) ReadKept(ctx context.Context, ks []hostfs.Kept) ([]hostfs.File, error) {
	files, err := c.procFiles.ReadKept(ctx, ks)
	for i, k := range ks {
		c.reads[c.names[k]]++
		if err == nil && c.removed != "" && strings.HasPrefix(c.paths[k], c.removed) {
			files[i] = hostfs.File{Err: &fs.PathError{Op: "read", Path: c.paths[k], Err: syscall.ENODEV}}
		}
	}
	return files, err
}

// readsOf is how many reads of each of names since the last call.
func (c *countedFiles) readsOf(names ...string) []int {
	n := make([]int, len(names))
	for i, name := range names {
		n[i] = c.reads[name]
	}
	clear(c.reads)
	return n
}

const launcherScope = "/app.slice/launcher.scope"

// idleLauncher is a process at rest in a cgroup of its own, and a scanner
// that has seen it long enough to take it as unchanged.
func idleLauncher(t *testing.T, cgroupType string) (launcher fakeproc.Process, proc, cg string, s *Scanner, files *countedFiles) {
	t.Helper()
	launcher = fakeproc.Process{PID: 2600, PPID: 1987, Comm: "python3", Start: 4900000, RSSKB: 1 << 20,
		Argv: []string{"/usr/bin/python3", "launcher.py"}, Sched: "1000 20 3\n", Cgroup: "0::" + launcherScope + "\n"}
	proc, cg = fakeproc.WriteTree(t, host(launcher)...), t.TempDir()
	fakeproc.Cgroup{Path: launcherScope, UsageUsec: 5000, PIDs: []int{2600}, Type: cgroupType}.Write(t, cg)
	files = countFiles(proc)
	s = newScanner(files, nil)
	s.cgroupRoot = cg
	t.Cleanup(func() { s.Close() })
	for range 4 {
		if res := scanOnce(t, s); len(res.Workloads) != 0 {
			t.Fatalf("the launcher is taken for a workload: %+v", res.Workloads)
		}
	}
	return launcher, proc, cg, s, files
}

// execServer has the launcher exec into a vLLM server, which runs.
func execServer(t *testing.T, launcher fakeproc.Process, proc string) fakeproc.Process {
	server := launcher
	server.Argv = []string{"/usr/bin/python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"}
	server.Sched = "9000 20 9\n"
	server.Write(t, proc)
	return server
}

func isServer(res Result) bool {
	return len(res.Workloads) == 1 && res.Workloads[0].PID == 2600 && res.Workloads[0].Kind == KindVLLM
}

// A process whose cgroup ran none of its processes is not read: only the
// cgroup's two files are. Once the cgroup ran, its process is read again.
func TestScanQuietCgroupReadsNoProcess(t *testing.T) {
	launcher, proc, cg, s, files := idleLauncher(t, "")
	files.readsOf()
	scanOnce(t, s)
	got := files.readsOf("2600/stat", "2600/schedstat", "2600/cmdline", "cpu.stat", "cgroup.procs")
	if want := []int{0, 0, 0, 1, 1}; !slices.Equal(got, want) {
		t.Errorf("reads of stat, schedstat, cmdline, cpu.stat, cgroup.procs: %v, want %v", got, want)
	}
	execServer(t, launcher, proc)
	fakeproc.Cgroup{Path: launcherScope, UsageUsec: 5100, PIDs: []int{2600}}.Write(t, cg)
	if res := scanOnce(t, s); !isServer(res) {
		t.Errorf("after an exec in a cgroup that ran: %+v, want the vLLM server", res.Workloads)
	}
}

// A process noted in a cgroup is read again at the next scan: it may have
// exec'd between its last read and the cgroup's.
func TestScanCgroupNotedIsReadAtTheNextScan(t *testing.T) {
	launcher := fakeproc.Process{PID: 2600, PPID: 1987, Comm: "python3", Start: 4900000, RSSKB: 1 << 20,
		Argv: []string{"/usr/bin/python3", "launcher.py"}, Sched: "1000 20 3\n", Cgroup: "0::" + launcherScope + "\n"}
	proc, cg := fakeproc.WriteTree(t, host(launcher)...), t.TempDir()
	fakeproc.Cgroup{Path: launcherScope, UsageUsec: 5000, PIDs: []int{2600}}.Write(t, cg)
	s := newScanner(hostfs.New(proc).Processes(), nil)
	s.cgroupRoot = cg
	t.Cleanup(func() { s.Close() })
	scanOnce(t, s)
	scanOnce(t, s) // the second sight notes the cgroup
	execServer(t, launcher, proc)
	if res := scanOnce(t, s); !isServer(res) {
		t.Errorf("an exec just after the scan that noted its cgroup: %+v, want the vLLM server", res.Workloads)
	}
}

// A process moved to another cgroup runs there: its first one shows no
// CPU time, but no longer lists it.
func TestScanProcessMovedOutOfAQuietCgroup(t *testing.T) {
	launcher, proc, cg, s, _ := idleLauncher(t, "")
	fakeproc.Cgroup{Path: launcherScope, UsageUsec: 5000, PIDs: []int{}}.Write(t, cg)
	fakeproc.Cgroup{Path: "/app.slice/other.scope", UsageUsec: 100, PIDs: []int{2600}}.Write(t, cg)
	launcher.Cgroup = "0::/app.slice/other.scope\n"
	execServer(t, launcher, proc)
	if res := scanOnce(t, s); !isServer(res) {
		t.Errorf("moved, then exec'd: %+v, want the vLLM server", res.Workloads)
	}
	if g := s.known[2600].cg; g == nil || g.path != "/app.slice/other.scope" {
		t.Errorf("the moved process is noted in %+v, want its new cgroup", g)
	}
	if _, ok := s.cgroups[launcherScope]; ok {
		t.Error("the cgroup no process known is in is still held")
	}
}

// A pid that another process has (its /proc directory another) is read,
// though its cgroup shows no CPU time.
func TestScanPidReuseInAQuietCgroup(t *testing.T) {
	launcher, proc, _, s, _ := idleLauncher(t, "")
	if err := os.RemoveAll(filepath.Join(proc, "2600")); err != nil {
		t.Fatal(err)
	}
	server := execServer(t, launcher, proc)
	server.Sched = launcher.Sched
	server.Write(t, proc)
	if res := scanOnce(t, s); !isServer(res) {
		t.Errorf("the pid's next process: %+v, want the vLLM server", res.Workloads)
	}
	if g := s.cgroups[launcherScope]; g != nil {
		t.Errorf("the cgroup: %+v, want none noted until the new process is seen twice", g)
	}
	scanOnce(t, s)
	if g := s.cgroups[launcherScope]; g == nil || g.members != 1 {
		t.Errorf("the cgroup: %+v, want the new process noted in it", g)
	}
}

// A cgroup removed (its files read ENODEV) is let go, and its processes
// are read as where there is no cgroup.
func TestScanCgroupRemoved(t *testing.T) {
	launcher, proc, _, s, files := idleLauncher(t, "")
	files.removed = s.cgroupRoot + "/app.slice/"
	launcher.Cgroup = "0::/\n"
	execServer(t, launcher, proc)
	if res := scanOnce(t, s); !isServer(res) {
		t.Errorf("its cgroup removed, exec'd: %+v, want the vLLM server", res.Workloads)
	}
	if len(s.cgroups) != 0 || s.known[2600].cg != nil {
		t.Errorf("cgroups held: %v", s.cgroups)
	}
	s.Close()
	if s.held != 0 {
		t.Errorf("%d files held after Close, want none", s.held)
	}
}

// A threaded cgroup's processes may have threads in other cgroups: the
// scan does not use it.
func TestScanThreadedCgroupIsNotUsed(t *testing.T) {
	_, _, _, s, files := idleLauncher(t, "threaded")
	files.readsOf()
	scanOnce(t, s)
	if len(s.cgroups) != 0 {
		t.Errorf("cgroups held: %v", s.cgroups)
	}
	if got := files.readsOf("2600/schedstat"); got[0] != 1 {
		t.Errorf("schedstat read %d times, want 1", got[0])
	}
}

func TestCgroupRoot(t *testing.T) {
	for _, tc := range []struct{ mountinfo, want string }{
		{"35 24 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate\n", "/sys/fs/cgroup"},
		{"31 24 0:26 / /sys/fs/cgroup ro - tmpfs tmpfs ro\n41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n", "/sys/fs/cgroup/unified"},
		{"33 31 0:28 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n", ""},
		{"41 31 0:38 /../.. /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n", ""},
		{`41 31 0:38 / /mnt/a\040b rw - cgroup2 cgroup2 rw` + "\n", ""},
		{"", ""},
	} {
		if got := cgroupRoot([]byte(tc.mountinfo)); got != tc.want {
			t.Errorf("cgroupRoot(%q) = %q, want %q", tc.mountinfo, got, tc.want)
		}
	}
}

func TestCgroupPath(t *testing.T) {
	for _, tc := range []struct{ cgroup, want string }{
		{"0::/user.slice/user-1000.slice/session-2.scope\n", "/user.slice/user-1000.slice/session-2.scope"},
		{"12:pids:/user.slice\n1:name=systemd:/user.slice\n0::/user.slice\n", "/user.slice"},
		{"0::/\n", ""},
		{"0::/../../system.slice\n", ""},
		{"0::/a//b\n", ""},
		{"0::relative\n", ""},
		{"4:memory:/docker/abc\n", ""},
	} {
		if got := cgroupPath([]byte(tc.cgroup)); got != tc.want {
			t.Errorf("cgroupPath(%q) = %q, want %q", tc.cgroup, got, tc.want)
		}
	}
}

func FuzzCgroupFiles(f *testing.F) {
	f.Add([]byte("0::/user.slice\n"))
	f.Add([]byte("41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"))
	f.Add([]byte("2600\n2601\nx\n-1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if p := cgroupPath(data); p != "" && (p[0] != '/' || slices.Contains(strings.Split(p, "/")[1:], "..")) {
			t.Errorf("cgroupPath(%q) = %q", data, p)
		}
		if r := cgroupRoot(data); r != "" && r[0] != '/' {
			t.Errorf("cgroupRoot(%q) = %q", data, r)
		}
		if pids := parsePids(nil, data); !slices.IsSorted(pids) || slices.ContainsFunc(pids, func(p int) bool { return p <= 0 }) {
			t.Errorf("parsePids(%q) = %v", data, pids)
		}
	})
}
