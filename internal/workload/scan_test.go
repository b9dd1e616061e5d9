package workload

import (
	"errors"
	"github.com/spark-exporter/spark_exporter/internal/hostfs"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/spark-exporter/spark_exporter/internal/testing/fakeproc"
)

// The processes the tests start from, named as in fakeproc.
var (
	vllmServer      = fakeproc.VLLMServer
	engineCore      = fakeproc.EngineCore
	resourceTracker = fakeproc.ResourceTracker
	accelerate      = fakeproc.Accelerate
	trainer         = fakeproc.Trainer
)

func host(extra ...fakeproc.Process) []fakeproc.Process {
	return append([]fakeproc.Process{fakeproc.Init, fakeproc.Kthreadd, fakeproc.Kworker, fakeproc.LoginBash}, extra...)
}

func scanOnce(t *testing.T, s *Scanner) Result {
	t.Helper()
	res, err := s.Scan(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestScanGroupsProgramsAndSumsTheirMemory(t *testing.T) {
	root := fakeproc.WriteTree(t, host(vllmServer, engineCore, resourceTracker, accelerate, trainer)...)
	res := scanOnce(t, NewScanner(hostfs.New(root), nil))
	want := []Workload{
		{PID: 2101, Identity: Identity{Inference, KindVLLM, flagCap(0.4)},
			ResidentBytes: (3<<20 + 40<<20 + 24<<10) * 1024},
		{PID: 2301, Identity: Identity{Training, KindTRL, Cap{}},
			ResidentBytes: (512<<10 + 22<<20) * 1024},
	}
	if len(res.Workloads) != len(want) {
		t.Fatalf("got %+v, want %+v", res.Workloads, want)
	}
	for i := range want {
		if res.Workloads[i] != want[i] {
			t.Errorf("got %+v, want %+v", res.Workloads[i], want[i])
		}
	}
	if res.Unreadable != 0 || len(res.Problems) != 0 {
		t.Errorf("unreadable %d, problems %v; want none", res.Unreadable, res.Problems)
	}
}

// A command line is read once in a process's life, while its stat shows
// where it lies (arg_start, arg_end: to root, as the tests run).
func TestScanReadsACommandLineOnceInAProcessLife(t *testing.T) {
	root := fakeproc.WriteTree(t, host(vllmServer, engineCore)...)
	w := watch(root)
	s := newScanner(fsFiles{w}, nil)

	scanOnce(t, s)
	// Every process but the two kernel threads.
	if n := w.readsOf("cmdline"); n != 4 {
		t.Errorf("first scan read %d command lines, want 4", n)
	}
	if n := w.readsOf("stat"); n != 6 {
		t.Errorf("first scan read %d stat files, want 6", n)
	}
	scanOnce(t, s)
	if n := w.readsOf("cmdline"); n != 0 {
		t.Errorf("second scan read %d command lines, want 0", n)
	}
	// The kernel threads' stat is not read again either.
	if n := w.readsOf("stat"); n != 4 {
		t.Errorf("second scan read %d stat files, want 4", n)
	}

	// A new process is read; the others are not.
	accelerate.Write(t, root)
	res := scanOnce(t, s)
	if n := w.readsOf("cmdline"); n != 1 {
		t.Errorf("after one process started: %d command lines read, want 1", n)
	}
	if len(res.Workloads) != 2 {
		t.Errorf("got %+v, want the server and the trainer", res.Workloads)
	}

	// The pid is reused by another program: a new start time.
	reused := fakeproc.Process{PID: 2301, PPID: 1987, Comm: "htop", Start: 5000000, Argv: []string{"htop"}, RSSKB: 4096}
	reused.Write(t, root)
	res = scanOnce(t, s)
	if n := w.readsOf("cmdline"); n != 1 {
		t.Errorf("after a pid was reused: %d command lines read, want 1", n)
	}
	if len(res.Workloads) != 1 || res.Workloads[0].PID != 2101 {
		t.Errorf("got %+v, want only the server once its pid 2301 is htop", res.Workloads)
	}

	// Same process, new program (exec): comm changes, so is read again.
	execed := reused
	execed.Comm, execed.Argv = "llama-server", []string{"/opt/llama.cpp/bin/llama-server", "-m", "m.gguf"}
	execed.Write(t, root)
	res = scanOnce(t, s)
	if n := w.readsOf("cmdline"); n != 1 {
		t.Errorf("after an exec: %d command lines read, want 1", n)
	}
	if len(res.Workloads) != 2 || res.Workloads[1].Kind != KindLlamaCpp {
		t.Errorf("got %+v, want the server and llama-server", res.Workloads)
	}

	// Exited processes are forgotten.
	for _, pid := range []string{"2301", "2140"} {
		if err := os.RemoveAll(filepath.Join(root, pid)); err != nil {
			t.Fatal(err)
		}
	}
	scanOnce(t, s)
	if len(s.known) != 5 {
		t.Errorf("%d processes remembered after two exited, want 5 (four host processes and the server)", len(s.known))
	}
}

// Issue 28, item 11: a process that execs a program of the same name
// keeps its pid, start time and comm (python3 launcher.py →
// execv(python3 -m vllm serve …)); the next scan sees the server, and the
// reverse drops the classification, as a fresh scanner would.
func TestScanExecUnderTheSameCommIsClassifiedAgain(t *testing.T) {
	// hidden: stat hides arg_start and arg_end, as from a reader that is
	// not root; the command line is then reread at every scan.
	for _, hidden := range []bool{false, true} {
		launcher := fakeproc.Process{PID: 2600, PPID: 1987, Comm: "python3", Start: 4900000, RSSKB: 1 << 20,
			Argv: []string{"/usr/bin/python3", "launcher.py"}, HideMM: hidden}
		root := fakeproc.WriteTree(t, host(launcher)...)
		w := watch(root)
		s := newScanner(fsFiles{w}, nil)
		if res := scanOnce(t, s); len(res.Workloads) != 0 {
			t.Fatalf("the launcher alone: %+v", res.Workloads)
		}
		w.readsOf("cmdline")
		scanOnce(t, s)
		if n, want := w.readsOf("cmdline"), map[bool]int{false: 0, true: 1}[hidden]; n != want {
			t.Errorf("hidden %v: a scan with nothing changed read %d command lines, want %d", hidden, n, want)
		}
		server := launcher
		server.Argv = []string{"/usr/bin/python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"}
		server.Write(t, root)
		fresh := scanOnce(t, newScanner(fsFiles{watch(root)}, nil))
		if len(fresh.Workloads) != 1 || fresh.Workloads[0].Kind != KindVLLM {
			t.Fatalf("a fresh scanner after the exec: %+v, want the vLLM server", fresh.Workloads)
		}
		if res := scanOnce(t, s); !reflect.DeepEqual(res.Workloads, fresh.Workloads) {
			t.Errorf("hidden %v: after the exec: %+v, want %+v as a fresh scanner sees", hidden, res.Workloads, fresh.Workloads)
		}
		launcher.Write(t, root)
		if res := scanOnce(t, s); len(res.Workloads) != 0 {
			t.Errorf("hidden %v: after the exec back to the launcher: %+v, want none", hidden, res.Workloads)
		}
	}
}

func TestScanCountsUnreadableEntries(t *testing.T) {
	hidden := fakeproc.Process{PID: 2500, PPID: 1, Comm: "sshd", Start: 3000, Argv: []string{"sshd: spark [priv]"}, RSSKB: 9000}
	secret := fakeproc.Process{PID: 2501, PPID: 1, Comm: "python3", Start: 3100, Argv: []string{"python3", "-m", "vllm.entrypoints.openai.api_server"}, RSSKB: 9000}
	root := fakeproc.WriteTree(t, host(vllmServer, engineCore, hidden, secret)...)
	w := watch(root)
	w.fail["2500/stat"] = fs.ErrPermission    // hidepid=1: nothing readable
	w.fail["2501/cmdline"] = fs.ErrPermission // a security module refusing the command line
	w.fail["2140/status"] = fs.ErrPermission  // a child whose memory cannot be read
	s := newScanner(fsFiles{w}, nil)

	res := scanOnce(t, s)
	if res.Unreadable != 3 {
		t.Errorf("unreadable = %d, want 3", res.Unreadable)
	}
	// The server is still found; its memory is what could be read.
	if len(res.Workloads) != 1 || res.Workloads[0].PID != 2101 || res.Workloads[0].ResidentBytes != 3<<30 {
		t.Errorf("got %+v, want the server with its own 3 GiB", res.Workloads)
	}
	w.readsOf("cmdline")

	// An unreadable command line is tried again, and found once readable.
	delete(w.fail, "2501/cmdline")
	res = scanOnce(t, s)
	if n := w.readsOf("cmdline"); n != 1 {
		t.Errorf("%d command lines read on the second scan, want 1 (the one that failed)", n)
	}
	if len(res.Workloads) != 2 || res.Unreadable != 2 {
		t.Errorf("got %+v, unreadable %d; want two servers, 2 unreadable", res.Workloads, res.Unreadable)
	}
}

// Issue 28, item 1: the exporter out of descriptors (EMFILE, ENFILE) has
// not seen the processes it could not open: the scan fails, whichever
// file it was, rather than count them unreadable and the workloads they
// are as gone.
func TestScanOutOfDescriptorsFailsTheScan(t *testing.T) {
	for _, file := range []string{"2101/stat", "2101/cmdline", "2140/status"} {
		for _, errno := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE} {
			root := fakeproc.WriteTree(t, host(vllmServer, engineCore)...)
			w := watch(root)
			s := newScanner(fsFiles{w}, nil)
			if file == "2140/status" {
				scanOnce(t, s) // the engine core's status is read once it is a workload's
			}
			w.fail[file] = errno
			res, err := s.Scan(t.Context())
			if !errors.Is(err, errno) {
				t.Errorf("%s failing with %v: scan %+v, error %v; want the scan failed", file, errno, res, err)
			}
			if err != nil && strings.Contains(err.Error(), root) {
				t.Errorf("the error names the tree: %v", err)
			}
		}
	}
}

func TestScanLeavesOutProcessesThatExitMidScan(t *testing.T) {
	root := fakeproc.WriteTree(t, host(vllmServer, engineCore, accelerate, trainer)...)
	// Exited between the listing and the reads: an empty directory.
	if err := os.Mkdir(filepath.Join(root, "3001"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Exited after its stat was read: no command line.
	fakeproc.Process{PID: 3002, PPID: 1987, Comm: "vllm", Start: 9000, Argv: []string{"vllm", "serve"}, RSSKB: 1}.Write(t, root)
	os.Remove(filepath.Join(root, "3002", "cmdline"))
	// A child of the trainer that exited before its status was read.
	os.Remove(filepath.Join(root, "2302", "status"))
	// A stat read after the task died comes back empty.
	fakeproc.Process{PID: 3003, PPID: 1, Comm: "x", Start: 9100, Argv: []string{"x"}}.Write(t, root)
	os.WriteFile(filepath.Join(root, "3003", "stat"), nil, 0o644)
	w := watch(root)
	// The kernel answers ESRCH for a task that died while open.
	w.fail["2140/status"] = syscall.ESRCH

	res := scanOnce(t, newScanner(fsFiles{w}, nil))
	if res.Unreadable != 0 {
		t.Errorf("unreadable = %d, want 0: exited processes are not hidden ones", res.Unreadable)
	}
	if len(res.Workloads) != 2 {
		t.Fatalf("got %+v, want the server and the trainer", res.Workloads)
	}
	if got := res.Workloads[0].ResidentBytes; got != 3<<30 {
		t.Errorf("server resident %d, want 3 GiB (its engine core has gone)", got)
	}
	if got := res.Workloads[1].ResidentBytes; got != 512<<20 {
		t.Errorf("trainer resident %d, want 512 MiB (its child has gone)", got)
	}
}

func TestScanZombieIsNoWorkload(t *testing.T) {
	dead := vllmServer
	dead.State, dead.NoRSS = 'Z', true
	root := fakeproc.WriteTree(t, host(dead, engineCore)...)
	res := scanOnce(t, NewScanner(hostfs.New(root), nil))
	// The orphaned engine core stands alone, with no cap of its own.
	if len(res.Workloads) != 1 || res.Workloads[0].PID != 2140 || res.Workloads[0].Cap.Source != "" {
		t.Errorf("got %+v, want the engine core alone, uncapped", res.Workloads)
	}
}

func TestScanReportsACapProblemOnce(t *testing.T) {
	bad := vllmServer
	bad.Argv = []string{"vllm", "serve", "m", "--gpu-memory-utilization", "sk-live-SECRET"}
	root := fakeproc.WriteTree(t, host(bad)...)
	s := NewScanner(hostfs.New(root), nil)

	res := scanOnce(t, s)
	want := Problem{PID: 2101, Kind: KindVLLM, What: ProblemCapNotANumber}
	if len(res.Problems) != 1 || res.Problems[0] != want {
		t.Errorf("problems %+v, want [%+v]", res.Problems, want)
	}
	if len(res.Workloads) != 1 || res.Workloads[0].Cap.Source != "" {
		t.Errorf("got %+v, want the server with no cap", res.Workloads)
	}
	if res = scanOnce(t, s); len(res.Problems) != 0 {
		t.Errorf("problems reported again: %+v", res.Problems)
	}
}

func TestScanErrorNamesNoPath(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-such-proc")
	_, err := NewScanner(hostfs.New(missing), nil).Scan(t.Context())
	if err == nil {
		t.Fatal("no error for a missing /proc")
	}
	if strings.Contains(err.Error(), missing) || strings.Contains(err.Error(), "no-such-proc") {
		t.Errorf("error %q names the path", err)
	}
}

// A kernel thread's stat is read once while its /proc directory stays; a
// new directory at its pid (the pid reused by a new process) is read
// afresh, here a vLLM server.
func TestScanKernelThreadReadOnceWhileItsDirectoryStays(t *testing.T) {
	root := fakeproc.WriteTree(t, host()...)
	for _, open := range []struct {
		name string
		new  func() (*Scanner, *watchedFS)
	}{
		{"fs", func() (*Scanner, *watchedFS) { w := watch(root); return newScanner(fsFiles{w}, nil), w }},
		{"dir", func() (*Scanner, *watchedFS) { return NewScanner(hostfs.New(root), nil), nil }},
	} {
		t.Run(open.name, func(t *testing.T) {
			fakeproc.Kworker.Write(t, root)
			s, w := open.new()
			scanOnce(t, s)
			// A stat the scan would fail on, had it read it.
			stat := filepath.Join(root, "87", "stat")
			if err := os.WriteFile(stat, []byte("garbage"), 0o644); err != nil {
				t.Fatal(err)
			}
			if w != nil {
				w.readsOf("stat")
			}
			if res := scanOnce(t, s); res.Unreadable != 0 {
				t.Errorf("unreadable = %d: the kernel thread's stat was read again", res.Unreadable)
			}
			if w != nil {
				if n := w.reads["87/stat"]; n != 0 {
					t.Errorf("kernel thread's stat read %d times, want 0", n)
				}
			}

			// The new process's directory is made before the old one
			// goes, so that it cannot get the old one's inode.
			server := vllmServer
			server.PID = 9999
			server.Write(t, root)
			if err := os.RemoveAll(filepath.Join(root, "87")); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(filepath.Join(root, "9999"), filepath.Join(root, "87")); err != nil {
				t.Fatal(err)
			}
			res := scanOnce(t, s)
			if len(res.Workloads) != 1 || res.Workloads[0].PID != 87 || res.Workloads[0].Kind != KindVLLM {
				t.Errorf("got %+v, want the server at the kernel thread's old pid", res.Workloads)
			}
		})
	}
}

// Resident sizes whose sum does not fit 64 bits are corrupt: the process
// that would overflow the workload's sum is left out and counted as
// unreadable, rather than wrapping the sum round to a small figure.
func TestScanResidentSumBeyond64Bits(t *testing.T) {
	const largest = math.MaxUint64 / 1024 // the largest VmRSS in kB that bytes can hold
	server, core := vllmServer, engineCore
	server.RSSKB, core.RSSKB = largest, largest
	root := fakeproc.WriteTree(t, host(server, core)...)
	res := scanOnce(t, NewScanner(hostfs.New(root), nil))
	if len(res.Workloads) != 1 || res.Workloads[0].ResidentBytes != largest*1024 {
		t.Errorf("got %+v, want the server with its own %d bytes", res.Workloads, uint64(largest*1024))
	}
	if res.Unreadable != 1 {
		t.Errorf("unreadable = %d, want 1 (the engine core whose size overflows the sum)", res.Unreadable)
	}
}

// A process whose schedstat reads as it did is not read again; one that
// ran is, and an exec into an engine is seen in that scan.
func TestScanHeldSchedstatRereadsOnlyWhatRan(t *testing.T) {
	for _, hidden := range []bool{false, true} {
		launcher := fakeproc.Process{PID: 2600, PPID: 1987, Comm: "python3", Start: 4900000, RSSKB: 1 << 20,
			Argv: []string{"/usr/bin/python3", "launcher.py"}, HideMM: hidden, Sched: "1000 20 3\n"}
		root := fakeproc.WriteTree(t, host(launcher)...)
		s := NewScanner(hostfs.New(root), nil)
		t.Cleanup(func() { s.Close() })
		scanOnce(t, s)
		// Not seen: the stat and command line change with the same run time.
		server := launcher
		server.Argv = []string{"/usr/bin/python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"}
		server.Write(t, root)
		if res := scanOnce(t, s); len(res.Workloads) != 0 {
			t.Fatalf("hidden %v: a process that did not run was read again: %+v", hidden, res.Workloads)
		}
		server.Sched = "2000 20 4\n"
		server.Write(t, root)
		if res := scanOnce(t, s); len(res.Workloads) != 1 || res.Workloads[0].Kind != KindVLLM {
			t.Errorf("hidden %v: after an exec that ran: %+v, want the vLLM server", hidden, res.Workloads)
		}
	}
}

// A pid another process has now (its directory another) carries nothing
// of the first, though its schedstat reads the same.
func TestScanPidReuseDropsTheHeldSchedstat(t *testing.T) {
	server := fakeproc.Process{PID: 2600, PPID: 1987, Comm: "python3", Start: 4900000, RSSKB: 1 << 20,
		Argv: []string{"/usr/bin/python3", "-m", "vllm.entrypoints.openai.api_server"}, Sched: "1000 20 3\n"}
	root := fakeproc.WriteTree(t, host(server)...)
	s := NewScanner(hostfs.New(root), nil)
	t.Cleanup(func() { s.Close() })
	if res := scanOnce(t, s); len(res.Workloads) != 1 {
		t.Fatalf("the server: %+v", res.Workloads)
	}
	if err := os.RemoveAll(filepath.Join(root, "2600")); err != nil {
		t.Fatal(err)
	}
	other := server
	other.Argv = []string{"/usr/bin/python3", "notebook.py"}
	other.Write(t, root)
	if res := scanOnce(t, s); len(res.Workloads) != 0 {
		t.Errorf("the pid's next process: %+v, want no workload", res.Workloads)
	}
	if err := os.RemoveAll(filepath.Join(root, "2600")); err != nil {
		t.Fatal(err)
	}
	if res := scanOnce(t, s); len(res.Workloads) != 0 || s.held != 0 {
		t.Errorf("exited: %+v, %d files held, want none", res.Workloads, s.held)
	}
}
