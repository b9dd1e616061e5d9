package workload

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/spark-exporter/spark_exporter/internal/hostfs"
)

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

// fsFiles reads a /proc tree through an fs.FS: the tests' trees, whose
// reads they count or fail.
type fsFiles struct{ fsys fs.FS }

func (f fsFiles) List(_ context.Context, ps []hostfs.Process) ([]hostfs.Process, error) {
	des, err := fs.ReadDir(f.fsys, ".")
	if err != nil {
		return ps, err
	}
	for _, de := range des {
		// A pid is a positive decimal number without sign or leading
		// zero: self, sys and meminfo are not processes.
		pid, err := strconv.Atoi(de.Name())
		if err != nil || pid <= 0 || strconv.Itoa(pid) != de.Name() {
			continue
		}
		p := hostfs.Process{PID: pid}
		if info, err := de.Info(); err == nil {
			if st, ok := info.Sys().(*syscall.Stat_t); ok {
				p.Ino = st.Ino
			}
		}
		ps = append(ps, p)
	}
	return ps, nil
}

func (f fsFiles) Read(_ context.Context, pid int, name string, buf []byte) ([]byte, error) {
	data, err := fs.ReadFile(f.fsys, strconv.Itoa(pid)+"/"+name)
	return append(buf[:0], data...), err
}

func (f fsFiles) ReadAll(ctx context.Context, ps []hostfs.Process, name string) ([]hostfs.File, error) {
	files := make([]hostfs.File, len(ps))
	for i, p := range ps {
		data, err := f.Read(ctx, p.PID, name, nil)
		files[i] = hostfs.File{Data: data, Err: err}
	}
	return files, nil
}

// KeepRunTime is not offered: the scanner rereads stat instead.
func (fsFiles) KeepRunTime(context.Context, int, bool, []byte) (hostfs.Kept, []byte, error) {
	return hostfs.Kept{}, nil, errors.ErrUnsupported
}

func (fsFiles) ReadKept(context.Context, []hostfs.Kept) ([]hostfs.File, error) { return nil, nil }

func (fsFiles) Close() error { return nil }

func (fsFiles) KeepFile(context.Context, string, int, []byte) (hostfs.Kept, []byte, error) {
	return hostfs.Kept{}, nil, errors.ErrUnsupported
}
