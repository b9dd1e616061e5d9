// Package connlimit bounds the connections an HTTP server holds open,
// without letting connections that send nothing keep new clients out.
//
// netutil.LimitListener leaves a connection over the limit in the kernel's
// queue, behind ones that never finish their headers. A Listener instead
// closes one that holds its slot without use (idle, or silent past its
// grace), never one moving bytes.
package connlimit

import (
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// defaultGrace: a client sends at once and reads as the answer comes; a TLS
// handshake takes milliseconds.
const defaultGrace = time.Second

// Listener needs Track as the server's ConnState.
type Listener struct {
	net.Listener
	max   int
	grace time.Duration
	now   func() time.Time

	mu     sync.Mutex
	open   map[*conn]struct{}
	freed  chan struct{} // a slot freed or a connection began waiting
	closed chan struct{}
	once   sync.Once
}

func New(l net.Listener, max int) *Listener {
	return &Listener{Listener: l, max: max, grace: defaultGrace, now: time.Now,
		open: map[*conn]struct{}{}, freed: make(chan struct{}, 1), closed: make(chan struct{})}
}

func (l *Listener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

type conn struct {
	net.Conn
	l      *Listener
	client string
	state  state
	since  time.Time    // the state's start
	closed bool         // its slot is free
	moved  atomic.Int64 // Unix ns of the last byte moved: a request that moves none is stalled
}

type state int

const (
	fresh  state = iota // accepted, no request yet
	active              // a request under way
	idle                // answered, waiting for the next request
)

func (c *conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.moved.Store(c.l.now().UnixNano())
	}
	return n, err
}

func (c *conn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if n > 0 {
		c.moved.Store(c.l.now().UnixNano())
	}
	return n, err
}

// Accept, at the limit, closes a connection holding its slot without use, or
// waits holding the new one, one descriptor beyond the limit.
func (l *Listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	for {
		l.mu.Lock()
		if len(l.open) < l.max {
			wc := &conn{Conn: c, l: l, client: clientOf(c), state: fresh, since: l.now()}
			wc.moved.Store(wc.since.UnixNano())
			l.open[wc] = struct{}{}
			l.mu.Unlock()
			return wc, nil
		}
		victim, wait := l.victim()
		if victim != nil {
			l.release(victim)
			l.mu.Unlock()
			victim.Conn.Close()
			continue
		}
		l.mu.Unlock()
		timer := time.NewTimer(wait)
		select {
		case <-l.freed:
		case <-timer.C:
		case <-l.closed:
			timer.Stop()
			c.Close()
			return nil, net.ErrClosed
		}
		timer.Stop()
	}
}

// victim is an idle connection, or one new or stalled past its grace;
// without one, wait is how long until one may be.
func (l *Listener) victim() (victim *conn, wait time.Duration) {
	held := map[string]int{}
	for c := range l.open {
		held[c.client]++
	}
	now, wait := l.now(), time.Minute
	var victimSince time.Time
	for c := range l.open {
		since := c.since
		if c.state == active {
			since = later(since, time.Unix(0, c.moved.Load()))
		}
		if c.state != idle {
			if left := since.Add(l.grace).Sub(now); left > 0 {
				wait = min(wait, left)
				continue
			}
		}
		if victim == nil || closesBefore(held[c.client], c.state, since, held[victim.client], victim.state, victimSince) {
			victim, victimSince = c, since
		}
	}
	return victim, wait
}

// closesBefore picks the client holding the most, then idle (its client
// loses no request), then oldest, so that keep-alive clients asking cheap
// requests cannot keep a scrape out.
func closesBefore(held int, s state, since time.Time, otherHeld int, other state, otherSince time.Time) bool {
	if held != otherHeld {
		return held > otherHeld
	}
	if (s == idle) != (other == idle) {
		return s == idle
	}
	return since.Before(otherSince)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// release: under l.mu.
func (l *Listener) release(c *conn) {
	if c.closed {
		return
	}
	c.closed = true
	delete(l.open, c)
	l.signal()
}

// signal: under l.mu.
func (l *Listener) signal() {
	select {
	case l.freed <- struct{}{}:
	default:
	}
}

// Track is the server's ConnState for the connections of every Listener.
func Track(nc net.Conn, state http.ConnState) {
	if t, ok := nc.(interface{ NetConn() net.Conn }); ok { // *tls.Conn
		nc = t.NetConn()
	}
	c, ok := nc.(*conn)
	if !ok {
		return
	}
	l := c.l
	l.mu.Lock()
	defer l.mu.Unlock()
	switch state {
	case http.StateActive:
		c.state, c.since = active, l.now()
	case http.StateIdle:
		c.state, c.since = idle, l.now()
		l.signal()
	case http.StateClosed, http.StateHijacked:
		l.release(c)
	}
}

// Unsent is the bytes written on nc that the client has not acknowledged
// (SIOCOUTQ); at the next request, they are an answer not taken.
func Unsent(nc net.Conn) (n int, ok bool) {
	if t, isTLS := nc.(interface{ NetConn() net.Conn }); isTLS {
		nc = t.NetConn()
	}
	c, isOurs := nc.(*conn)
	if !isOurs {
		return 0, false
	}
	sc, isSyscall := c.Conn.(syscall.Conn)
	if !isSyscall {
		return 0, false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return 0, false
	}
	var queued int32
	var errno syscall.Errno
	if raw.Control(func(fd uintptr) {
		// TIOCOUTQ is SIOCOUTQ on Linux.
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCOUTQ, uintptr(unsafe.Pointer(&queued)))
	}) != nil || errno != 0 {
		return 0, false
	}
	return int(queued), true
}

func (c *conn) Close() error {
	c.l.mu.Lock()
	c.l.release(c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}

func clientOf(c net.Conn) string {
	addr := c.RemoteAddr().String()
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}
