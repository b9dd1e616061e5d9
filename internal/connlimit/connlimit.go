// Package connlimit bounds the connections an HTTP server holds open, so
// that they never take the descriptors the collectors need, without
// letting connections that send nothing keep new clients out.
//
// golang.org/x/net/netutil.LimitListener, which it replaces, makes the
// connection over the limit wait in the kernel's queue until one closes:
// 200 connections that never finish their headers then hold every slot
// until the read deadline, and the scrapes queued behind them time out. A
// Listener instead closes, to make room, a connection that is waiting for
// a request — never one being answered — choosing the oldest of the
// client (remote address) that holds the most: one client's pile of
// stalled connections goes first, whatever its address.
package connlimit

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// DefaultGrace is how long a new connection has to send its request, and
// an idle keep-alive connection waits, before it may be closed to make
// room: a client sends its request as soon as it has connected (a TLS
// handshake takes milliseconds), so a connection silent this long is one
// holding a slot.
const DefaultGrace = time.Second

// Listener accepts at most max connections open at once. Set the server's
// ConnState to Track, so that it knows which connections are waiting for
// a request.
type Listener struct {
	net.Listener
	max   int
	grace time.Duration
	now   func() time.Time

	mu     sync.Mutex
	open   map[*conn]struct{}
	freed  chan struct{} // a slot freed or a connection began waiting
	closed chan struct{} // Close was called
	once   sync.Once
}

// New bounds l to max connections open at once.
func New(l net.Listener, max int) *Listener {
	return &Listener{Listener: l, max: max, grace: DefaultGrace, now: time.Now,
		open: map[*conn]struct{}{}, freed: make(chan struct{}, 1), closed: make(chan struct{})}
}

// Close closes the listener, and ends an Accept waiting for room.
func (l *Listener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// conn is an accepted connection and what the listener knows of it.
type conn struct {
	net.Conn
	l      *Listener
	client string
	// waiting: no request under way (new, or idle between requests),
	// since then; closed: its slot is free.
	waiting bool
	since   time.Time
	closed  bool
}

// Accept waits for a connection; at the limit it closes a waiting one to
// make room, or, when every connection is being answered, waits for one
// to end (the new connection is then held, one descriptor beyond the
// limit).
func (l *Listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	for {
		l.mu.Lock()
		if len(l.open) < l.max {
			wc := &conn{Conn: c, l: l, client: clientOf(c), waiting: true, since: l.now()}
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

// victim is the connection to close for room: of the waiting ones past
// their grace, the oldest of the client that holds the most connections.
// Without one, wait is how long until a waiting one's grace ends (or a
// while, when none is waiting).
func (l *Listener) victim() (victim *conn, wait time.Duration) {
	held := map[string]int{}
	for c := range l.open {
		held[c.client]++
	}
	now, wait := l.now(), time.Minute
	for c := range l.open {
		if !c.waiting {
			continue
		}
		if left := c.since.Add(l.grace).Sub(now); left > 0 {
			wait = min(wait, left)
			continue
		}
		if victim == nil || held[c.client] > held[victim.client] ||
			held[c.client] == held[victim.client] && c.since.Before(victim.since) {
			victim = c
		}
	}
	return victim, wait
}

// release frees c's slot; under l.mu.
func (l *Listener) release(c *conn) {
	if c.closed {
		return
	}
	c.closed = true
	delete(l.open, c)
	l.signal()
}

// signal wakes an Accept waiting for room; under l.mu.
func (l *Listener) signal() {
	select {
	case l.freed <- struct{}{}:
	default:
	}
}

// Track is the server's ConnState, for the connections of every Listener:
// it notes which are waiting for a request (new, idle) and which are
// being answered.
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
		c.waiting = false
	case http.StateIdle:
		c.waiting, c.since = true, l.now()
		l.signal()
	case http.StateClosed, http.StateHijacked:
		l.release(c)
	}
}

func (c *conn) Close() error {
	c.l.mu.Lock()
	c.l.release(c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}

// clientOf is the connection's client: its remote address without the
// port.
func clientOf(c net.Conn) string {
	addr := c.RemoteAddr().String()
	if host, _, err := net.SplitHostPort(addr); err == nil {
		return host
	}
	return addr
}
