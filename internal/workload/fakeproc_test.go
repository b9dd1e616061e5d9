package workload

import (
	"io/fs"
	"os"
	"strings"
	"sync"
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
