package connlimit

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// serve serves handler on 127.0.0.1 behind a Listener of max connections
// with the given grace, and returns its address.
func serve(t *testing.T, max int, grace time.Duration, handler http.Handler) string {
	addr, _ := serveIdle(t, max, grace, handler)
	return addr
}

// serveIdle is serve, and a channel told each time a connection turns
// idle after its answer: the server marks it so after the client has read
// the answer, so a test that orders idle connections waits for it.
func serveIdle(t *testing.T, max int, grace time.Duration, handler http.Handler) (string, <-chan struct{}) {
	t.Helper()
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := New(inner, max)
	l.grace = grace
	idle := make(chan struct{}, 64)
	state := func(c net.Conn, s http.ConnState) {
		Track(c, s)
		if s == http.StateIdle {
			select {
			case idle <- struct{}{}:
			default:
			}
		}
	}
	server := &http.Server{Handler: handler, ConnState: state, ReadHeaderTimeout: time.Minute}
	go server.Serve(l)
	t.Cleanup(func() { server.Close() })
	return inner.Addr().String(), idle
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(30 * time.Second))
	return c
}

func get(t *testing.T, c net.Conn) *http.Response {
	t.Helper()
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: test\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// Connections that never finish their headers hold every slot: a new
// client's request is answered all the same, the stalled ones closed to
// make room, oldest first.
func TestStalledConnectionsMakeRoom(t *testing.T) {
	addr := serve(t, 4, 0, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	stalled := make([]net.Conn, 20)
	for i := range stalled {
		stalled[i] = dial(t, addr)
		io.WriteString(stalled[i], "GET / HTTP/1.1\r\nHost: te")
	}
	if resp := get(t, dial(t, addr)); resp.StatusCode != http.StatusOK {
		t.Errorf("a new request beside 20 stalled connections: %s", resp.Status)
	}
	// The first stalled connection was closed: its read ends (EOF, or a
	// reset since it left bytes unread), not at the deadline.
	_, err := stalled[0].Read(make([]byte, 1))
	if ne, ok := err.(net.Error); err == nil || ok && ne.Timeout() {
		t.Errorf("the oldest stalled connection: read %v, want it closed", err)
	}
}

// A connection being answered, within its grace, is never closed for
// room: the one over the limit waits until an answer ends.
func TestAnsweredConnectionsAreNotClosed(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 2)
	addr := serve(t, 2, time.Hour, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			entered <- struct{}{}
			<-release
		}
	}))
	held := make([]net.Conn, 2)
	answers := make(chan *http.Response, 2)
	for i := range held {
		held[i] = dial(t, addr)
		io.WriteString(held[i], "GET /hold HTTP/1.1\r\nHost: test\r\n\r\n")
		<-entered
		go func(c net.Conn) {
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Error("a held request:", err)
			}
			answers <- resp
		}(held[i])
	}
	third := dial(t, addr)
	io.WriteString(third, "GET / HTTP/1.1\r\nHost: test\r\n\r\n")
	close(release)
	for range held {
		if resp := <-answers; resp == nil || resp.StatusCode != http.StatusOK {
			t.Errorf("a held request was not answered: %v", resp)
		}
	}
	resp, err := http.ReadResponse(bufio.NewReader(third), nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("the third request once the answers ended: %v %v", resp, err)
	}
}

// A server shut down while its Accept waits for room (every connection
// being answered) stops serving: Close ends the wait.
func TestCloseEndsAWaitingAccept(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := New(inner, 1)
	entered, release := make(chan struct{}), make(chan struct{})
	server := &http.Server{ConnState: Track, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
	})}
	served := make(chan error, 1)
	go func() { served <- server.Serve(l) }()
	held := dial(t, inner.Addr().String())
	io.WriteString(held, "GET / HTTP/1.1\r\nHost: test\r\n\r\n")
	<-entered
	dial(t, inner.Addr().String()) // accepted, waiting for room
	l.Close()
	select {
	case err := <-served:
		if err == nil {
			t.Error("Serve returned no error after Close")
		}
	case <-time.After(30 * time.Second):
		t.Error("Serve still waiting for room 30 s after Close")
	}
	close(release)
	server.Close()
}

// closed reports whether the server closed c: a read ends (EOF, or a reset
// since it left bytes unread), not at the deadline.
func closed(c net.Conn) bool {
	_, err := c.Read(make([]byte, 1))
	ne, ok := err.(net.Error)
	return err != nil && !(ok && ne.Timeout())
}

// Keep-alive connections that have had their answer are closed for room
// even within their grace: clients that keep asking cheap requests are
// never idle for long, and would otherwise keep a new client out for as
// long as they kept asking.
func TestIdleKeepAliveConnectionsMakeRoom(t *testing.T) {
	addr, idle := serveIdle(t, 4, time.Hour, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	squatters := make([]net.Conn, 4)
	for i := range squatters {
		squatters[i] = dial(t, addr)
		if resp := get(t, squatters[i]); resp.StatusCode != http.StatusOK {
			t.Fatalf("squatter %d: %s", i, resp.Status)
		}
		<-idle
	}
	if resp := get(t, dial(t, addr)); resp.StatusCode != http.StatusOK {
		t.Errorf("a new request beside 4 idle keep-alive connections: %s", resp.Status)
	}
	if !closed(squatters[0]) {
		t.Error("the oldest idle connection was not the one closed")
	}
}

// Requests under way that move no byte past the grace — a promised body
// that never comes — are closed for room; the new client is answered.
func TestStalledRequestsMakeRoom(t *testing.T) {
	entered := make(chan struct{}, 4)
	addr := serve(t, 4, 0, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > 0 {
			entered <- struct{}{}
			io.Copy(io.Discard, r.Body) // waits for the body
		}
	}))
	stalled := make([]net.Conn, 4)
	for i := range stalled {
		stalled[i] = dial(t, addr)
		io.WriteString(stalled[i], "GET / HTTP/1.1\r\nHost: test\r\nContent-Length: 1000\r\n\r\n")
		<-entered // being answered, not new
	}
	if resp := get(t, dial(t, addr)); resp.StatusCode != http.StatusOK {
		t.Errorf("a new request beside 4 requests waiting for their body: %s", resp.Status)
	}
	if !closed(stalled[0]) {
		t.Error("the oldest stalled request was not the one closed")
	}
}

// Unsent tells what the server wrote that the client has not taken: none
// on a new connection, some once the server has written more than a
// client that never reads can hold.
func TestUnsentCountsAnAnswerNotTaken(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := New(inner, 4)
	defer l.Close()
	client := dial(t, inner.Addr().String())
	client.(*net.TCPConn).SetReadBuffer(4096)
	server, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	if n, ok := Unsent(server); !ok || n != 0 {
		t.Errorf("a new connection: Unsent %d, %v; want 0, true", n, ok)
	}
	// Written until the kernel's buffers are full: the write times out.
	server.SetWriteDeadline(time.Now().Add(time.Second))
	for {
		if _, err := server.Write(make([]byte, 64<<10)); err != nil {
			break
		}
	}
	if n, ok := Unsent(server); !ok || n == 0 {
		t.Errorf("a connection whose client reads nothing: Unsent %d, %v; want some", n, ok)
	}
	if _, ok := Unsent(client); ok {
		t.Error("Unsent answered for a connection that is not a Listener's")
	}
}
