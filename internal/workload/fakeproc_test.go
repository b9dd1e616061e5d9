package workload

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// fakeProc is a process to write into a /proc tree made for a test.
type fakeProc struct {
	pid, ppid int
	comm      string
	state     byte   // 'S' when zero
	start     uint64 // starttime, clock ticks after boot
	argv      []string
	rssKB     uint64 // VmRSS; none when noRSS
	noRSS     bool
}

// write puts the process's stat, status and cmdline under root, as a
// kernel 6.8 writes them (stat's 52 fields, status's usual lines).
func (p fakeProc) write(t testing.TB, root string) {
	t.Helper()
	state := p.state
	if state == 0 {
		state = 'S'
	}
	dir := filepath.Join(root, strconv.Itoa(p.pid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	stat := fmt.Sprintf("%d (%s) %c %d %d %d 0 -1 4194560 18233 0 12 0 4512 1204 0 0 20 0 12 0 %d 9136275456 %d "+
		"18446744073709551615 187650793357312 187650796240932 281474523285200 0 0 0 0 16781312 134234618 0 0 0 17 3 0 0 0 0 0 "+
		"187650796323872 187650796388424 187651099299840 281474523291333 281474523291468 281474523291468 281474523295715 0\n",
		p.pid, p.comm, state, p.ppid, p.pid, p.ppid, p.start, p.rssKB/4)
	status := fmt.Sprintf("Name:\t%s\nUmask:\t0022\nState:\t%c (sleeping)\nTgid:\t%d\nNgid:\t0\nPid:\t%d\nPPid:\t%d\n"+
		"TracerPid:\t0\nUid:\t1000\t1000\t1000\t1000\nGid:\t1000\t1000\t1000\t1000\nFDSize:\t256\n",
		p.comm, state, p.pid, p.pid, p.ppid)
	if !p.noRSS {
		status += fmt.Sprintf("VmPeak:\t 9136275 kB\nVmSize:\t 8922144 kB\nVmLck:\t       0 kB\nVmHWM:\t %8d kB\n"+
			"VmRSS:\t %8d kB\nRssAnon:\t %8d kB\nRssFile:\t  204800 kB\nVmSwap:\t       0 kB\n", p.rssKB, p.rssKB, p.rssKB)
	}
	status += "Threads:\t12\nSigQ:\t0/491123\nvoluntary_ctxt_switches:\t1204\nnonvoluntary_ctxt_switches:\t31\n"
	cmdline := ""
	if len(p.argv) > 0 {
		cmdline = strings.Join(p.argv, "\x00") + "\x00"
	}
	for name, data := range map[string]string{"stat": stat, "status": status, "cmdline": cmdline, "comm": p.comm + "\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o444); err != nil {
			t.Fatal(err)
		}
	}
}

func writeTree(t testing.TB, procs ...fakeProc) string {
	t.Helper()
	root := t.TempDir()
	for _, p := range procs {
		p.write(t, root)
	}
	return root
}

// watchedFS counts the files read and fails the reads it is told to, as
// hidepid or permissions would: tests run as root, whom file modes do not
// stop.
type watchedFS struct {
	fs.FS
	mu    sync.Mutex
	reads map[string]int
	fail  map[string]error
}

func watch(root string) *watchedFS {
	return &watchedFS{FS: os.DirFS(root), reads: map[string]int{}, fail: map[string]error{}}
}

func (w *watchedFS) ReadFile(name string) ([]byte, error) {
	w.mu.Lock()
	w.reads[name]++
	err := w.fail[name]
	w.mu.Unlock()
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return fs.ReadFile(w.FS, name)
}

// readsOf counts the reads of one kind of file (cmdline, stat) since the
// last call.
func (w *watchedFS) readsOf(file string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for name, c := range w.reads {
		if strings.HasSuffix(name, "/"+file) {
			n += c
			delete(w.reads, name)
		}
	}
	return n
}

// A host's usual processes, none of them a workload.
var (
	initProc  = fakeProc{pid: 1, ppid: 0, comm: "systemd", start: 2, argv: []string{"/sbin/init", "splash"}, rssKB: 13312}
	kthreadd  = fakeProc{pid: 2, ppid: 0, comm: "kthreadd", start: 2, noRSS: true}
	kworker   = fakeProc{pid: 87, ppid: 2, comm: "kworker/3:1-events", state: 'I', start: 40, noRSS: true}
	loginBash = fakeProc{pid: 1987, ppid: 1, comm: "bash", start: 4800011, argv: []string{"-bash"}, rssKB: 5376}
)
