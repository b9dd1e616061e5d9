package journal

// sd-journal(3) found with dlsym: no systemd header is needed to build, and a
// host without libsystemd.so.0 gets an error at open, not a binary that fails to start.

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct sd_journal sd_journal;

typedef struct {
	int (*open)(sd_journal **, int);
	int (*open_directory)(sd_journal **, const char *, int);
	void (*close)(sd_journal *);
	int (*add_match)(sd_journal *, const void *, size_t);
	int (*seek_head)(sd_journal *);
	int (*next)(sd_journal *);
	int (*get_data)(sd_journal *, const char *, const void **, size_t *);
	int (*get_realtime_usec)(sd_journal *, uint64_t *);
	int (*wait)(sd_journal *, uint64_t);
	int (*get_usage)(sd_journal *, uint64_t *);
	int (*set_data_threshold)(sd_journal *, size_t);
} sdj_api;

#define SDJ_SYM(field, name) \
	do { \
		*(void **)(&a->field) = dlsym(lib, name); \
		if (!a->field) return "libsystemd lacks " name; \
	} while (0)

static const char *sdj_load(const char *soname, sdj_api *a) {
	void *lib = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
	if (!lib) return dlerror();
	SDJ_SYM(open, "sd_journal_open");
	SDJ_SYM(open_directory, "sd_journal_open_directory");
	SDJ_SYM(close, "sd_journal_close");
	SDJ_SYM(add_match, "sd_journal_add_match");
	SDJ_SYM(seek_head, "sd_journal_seek_head");
	SDJ_SYM(next, "sd_journal_next");
	SDJ_SYM(get_data, "sd_journal_get_data");
	SDJ_SYM(get_realtime_usec, "sd_journal_get_realtime_usec");
	SDJ_SYM(wait, "sd_journal_wait");
	SDJ_SYM(get_usage, "sd_journal_get_usage");
	SDJ_SYM(set_data_threshold, "sd_journal_set_data_threshold");
	return NULL;
}

static int sdj_open(sdj_api *a, sd_journal **j, int flags) { return a->open(j, flags); }
static int sdj_open_directory(sdj_api *a, sd_journal **j, const char *dir) { return a->open_directory(j, dir, 0); }
static void sdj_close(sdj_api *a, sd_journal *j) { a->close(j); }
static int sdj_add_match(sdj_api *a, sd_journal *j, const char *m, size_t n) { return a->add_match(j, m, n); }
static int sdj_seek_head(sdj_api *a, sd_journal *j) { return a->seek_head(j); }
static int sdj_next(sdj_api *a, sd_journal *j) { return a->next(j); }
static int sdj_get_data(sdj_api *a, sd_journal *j, const char *f, const void **d, size_t *n) { return a->get_data(j, f, d, n); }
static int sdj_get_realtime_usec(sdj_api *a, sd_journal *j, uint64_t *t) { return a->get_realtime_usec(j, t); }
static int sdj_wait(sdj_api *a, sd_journal *j, uint64_t usec) { return a->wait(j, usec); }
static int sdj_get_usage(sdj_api *a, sd_journal *j, uint64_t *n) { return a->get_usage(j, n); }
static int sdj_set_data_threshold(sdj_api *a, sd_journal *j, size_t n) { return a->set_data_threshold(j, n); }
*/
import "C"

import (
	"errors"
	"fmt"
	"syscall"
	"time"
	"unsafe"
)

const defaultLibrary = "libsystemd.so.0"

// sd-journal.h's flags: the local machine's journal, of system services
// and the kernel only (the killers are system services).
const openLocalSystem = 1<<0 | 1<<2

type library struct{ api C.sdj_api }

func loadLibrary(soname string) (*library, error) {
	name := C.CString(soname)
	defer C.free(unsafe.Pointer(name))
	lib := &library{}
	if msg := C.sdj_load(name, &lib.api); msg != nil {
		return nil, errors.New(C.GoString(msg))
	}
	return lib, nil
}

// handle is not safe for concurrent use: only the reader's goroutine holds it.
type handle struct {
	lib    *library
	j      *C.sd_journal
	fields map[string]*C.char
}

func errno(op string, r C.int) error {
	return fmt.Errorf("%s: %w", op, syscall.Errno(-r))
}

func (lib *library) openJournal(dir string) (*handle, error) {
	h := &handle{lib: lib, fields: map[string]*C.char{}}
	var r C.int
	if dir == "" {
		r = C.sdj_open(&lib.api, &h.j, openLocalSystem)
	} else {
		cdir := C.CString(dir)
		defer C.free(unsafe.Pointer(cdir))
		r = C.sdj_open_directory(&lib.api, &h.j, cdir)
	}
	if r < 0 {
		return nil, errno("open the journal", r)
	}
	return h, nil
}

func (h *handle) close() {
	C.sdj_close(&h.lib.api, h.j)
	for _, f := range h.fields {
		C.free(unsafe.Pointer(f))
	}
}

func (h *handle) addMatch(m string) error {
	cm := C.CString(m)
	defer C.free(unsafe.Pointer(cm))
	if r := C.sdj_add_match(&h.lib.api, h.j, cm, C.size_t(len(m))); r < 0 {
		return errno("add a match", r)
	}
	return nil
}

func (h *handle) seekHead() error {
	if r := C.sdj_seek_head(&h.lib.api, h.j); r < 0 {
		return errno("seek", r)
	}
	return nil
}

func (h *handle) next() (bool, error) {
	r := C.sdj_next(&h.lib.api, h.j)
	if r < 0 {
		return false, errno("next entry", r)
	}
	return r > 0, nil
}

func (h *handle) field(name string) string {
	cname, ok := h.fields[name]
	if !ok {
		cname = C.CString(name)
		h.fields[name] = cname
	}
	var data unsafe.Pointer
	var n C.size_t
	if C.sdj_get_data(&h.lib.api, h.j, cname, &data, &n) < 0 {
		return ""
	}
	b := C.GoBytes(data, C.int(min(int(n), len(name)+1+maxField)))
	if len(b) <= len(name) || b[len(name)] != '=' {
		return ""
	}
	return string(b[len(name)+1:])
}

func (h *handle) realtime() uint64 {
	var t C.uint64_t
	if C.sdj_get_realtime_usec(&h.lib.api, h.j, &t) < 0 {
		return 0
	}
	return uint64(t)
}

// wait returns when the journal changed or after d: false when nothing
// did (SD_JOURNAL_NOP).
func (h *handle) wait(d time.Duration) bool {
	return C.sdj_wait(&h.lib.api, h.j, C.uint64_t(d.Microseconds())) != 0
}

func (h *handle) usage() uint64 {
	var n C.uint64_t
	if C.sdj_get_usage(&h.lib.api, h.j, &n) < 0 {
		return 0
	}
	return uint64(n)
}

func (h *handle) setDataThreshold(n int) {
	C.sdj_set_data_threshold(&h.lib.api, h.j, C.size_t(n))
}
