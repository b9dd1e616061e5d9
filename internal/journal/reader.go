package journal

import (
	"encoding/hex"
	"errors"
	"maps"
	"sync"
	"time"
)

// A call stuck on a wedged filesystem outlives Close (closeWait) and
// closes the journal itself when it returns; poll bounds Close otherwise.
const (
	poll      = 250 * time.Millisecond
	startWait = 5 * time.Second
	closeWait = 5 * time.Second
	batch     = 1024 // entries read between two looks at Close
)

// Source: Dir empty is the system journal; a zero Boot reads nothing.
type Source struct {
	Dir     string
	Boot    [16]byte
	Library string
}

// State is Readable when at least one journal file is open.
type State struct {
	Readable bool
	Kills    map[string]uint64
	Err      error
}

var (
	errNoBoot  = errors.New("this boot's id is unknown")
	errNoFiles = errors.New("no journal file could be opened (the systemd-journal group reads the system journal)")
)

type Reader struct {
	mu    sync.Mutex
	state State
	tally tally

	src      Source
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{} // nil until Start
}

// New reads nothing until Start.
func New(src Source) *Reader {
	r := &Reader{src: src, tally: newTally(), stop: make(chan struct{})}
	r.state.Err = errNoFiles
	return r
}

// Start reads the journal in the background until Close, and waits, at
// most startWait, until what it holds now is counted; call it once.
func (r *Reader) Start() {
	r.done = make(chan struct{})
	ready := make(chan struct{})
	go r.run(r.src, ready)
	select {
	case <-ready:
	case <-time.After(startWait):
	}
}

func (r *Reader) State() State {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.state
	s.Kills = maps.Clone(r.tally.kills)
	return s
}

func (r *Reader) Close() error {
	r.stopOnce.Do(func() { close(r.stop) })
	if r.done == nil {
		return nil
	}
	select {
	case <-r.done:
	case <-time.After(closeWait):
	}
	return nil
}

func (r *Reader) run(src Source, ready chan struct{}) {
	defer close(r.done)
	h, err := open(src)
	if err != nil {
		r.mu.Lock()
		r.state.Err = err
		r.mu.Unlock()
		close(ready)
		return
	}
	defer h.close()
	changed := true
	for {
		more := r.drain(h)
		if changed {
			r.setReadable(h.usage() > 0)
		}
		if ready != nil {
			close(ready)
			ready = nil
		}
		select {
		case <-r.stop:
			return
		default:
		}
		changed = more || h.wait(poll)
	}
}

// open: matches of one field are alternatives, of two both hold.
func open(src Source) (*handle, error) {
	if src.Boot == [16]byte{} {
		return nil, errNoBoot
	}
	name := src.Library
	if name == "" {
		name = defaultLibrary
	}
	lib, err := loadLibrary(name)
	if err != nil {
		return nil, err
	}
	h, err := lib.openJournal(src.Dir)
	if err != nil {
		return nil, err
	}
	h.setDataThreshold(maxField)
	matches := []string{"_BOOT_ID=" + hex.EncodeToString(src.Boot[:])}
	for _, u := range units() {
		matches = append(matches, "_SYSTEMD_UNIT="+u)
	}
	for _, m := range matches {
		if err = h.addMatch(m); err != nil {
			break
		}
	}
	if err == nil {
		err = h.seekHead()
	}
	if err != nil {
		h.close()
		return nil, err
	}
	return h, nil
}

// drain: an error (a file that cannot be read on) is retried after the next wait.
func (r *Reader) drain(h *handle) (more bool) {
	for range batch {
		ok, err := h.next()
		if err != nil || !ok {
			return false
		}
		e := entry{
			Message:  h.field("MESSAGE"),
			Unit:     h.field("_SYSTEMD_UNIT"),
			Comm:     h.field("_COMM"),
			UID:      h.field("_UID"),
			Realtime: h.realtime(),
		}
		r.mu.Lock()
		r.tally.add(e)
		r.mu.Unlock()
	}
	return true
}

func (r *Reader) setReadable(ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.state.Readable = ok
	r.state.Err = nil
	if !ok {
		r.state.Err = errNoFiles
	}
}
