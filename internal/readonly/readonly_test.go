package readonly

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// A request promising a body that never comes is
// answered 400 at once, and its connection closed, rather than held until
// the read deadline; next never runs.
func TestBodyIsRefusedWithoutWaitingForIt(t *testing.T) {
	served := false
	server := httptest.NewUnstartedServer(Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { served = true })))
	server.Config.ReadTimeout = time.Hour
	server.Start()
	defer server.Close()
	c, err := net.DialTimeout("tcp", server.Listener.Addr().String(), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: test\r\nContent-Length: 1000\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || served {
		t.Errorf("%s, handler ran: %v; want 400 without it", resp.Status, served)
	}
	_, err = br.ReadByte()
	var ne net.Error
	if err == nil || errors.As(err, &ne) && ne.Timeout() {
		t.Errorf("the connection was not closed after the answer: %v", err)
	}
}
