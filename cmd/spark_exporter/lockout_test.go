package main

import (
	"bufio"
	"context"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
)

// Issue 38, items 2 to 4: clients that hold what the server lends them —
// a --web.max-requests slot, a connection of --web.max-connections — do
// not keep a scrape out. 64 hostile clients of one kind (the connection
// limit's default) keep at it while a good scrape, on a new connection
// every second, must be answered 200 within 10 s, Prometheus's default
// scrape timeout. They used to get 503s, or no answer.

// hostileClients is how many of each kind attack at once: the default
// --web.max-connections, so that every connection is theirs.
const hostileClients = 64

// attackPace is how often a hostile client acts again: the issue's
// squatters asked every 0.5 s, and reconnects are paced the same.
const attackPace = 500 * time.Millisecond

// hostile is one client's attack on addr. It returns when its connection
// fails (the server closed it), after calling ready once its first
// attack is under way.
type hostile func(conn net.Conn, ready func(), stop <-chan struct{})

// bodyHeld asks GET /metrics promising a body that never comes, then
// waits for whatever the server does.
func bodyHeld(conn net.Conn, ready func(), _ <-chan struct{}) {
	if _, err := io.WriteString(conn, "GET /metrics HTTP/1.1\r\nHost: test\r\nContent-Length: 1000\r\n\r\n"); err != nil {
		return
	}
	ready()
	io.Copy(io.Discard, conn)
}

// pipeliner asks 200 pipelined scrapes with a 4 KiB receive buffer and
// never reads an answer; it asks one more every attackPace.
func pipeliner(conn net.Conn, ready func(), stop <-chan struct{}) {
	request := "GET /metrics HTTP/1.1\r\nHost: test\r\n\r\n"
	if _, err := io.WriteString(conn, strings.Repeat(request, 200)); err != nil {
		return
	}
	ready()
	for tick := time.NewTicker(attackPace); ; {
		select {
		case <-stop:
			tick.Stop()
			return
		case <-tick.C:
		}
		if _, err := io.WriteString(conn, request); err != nil {
			tick.Stop()
			return
		}
	}
}

// squatter keeps its connection alive with a cheap request (a 404, or a
// 401 without credentials) every attackPace.
func squatter(conn net.Conn, ready func(), stop <-chan struct{}) {
	br := bufio.NewReader(conn)
	for tick := time.NewTicker(attackPace); ; {
		if _, err := io.WriteString(conn, "GET /nothing-here HTTP/1.1\r\nHost: test\r\n\r\n"); err != nil {
			tick.Stop()
			return
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			tick.Stop()
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		ready()
		select {
		case <-stop:
			tick.Stop()
			return
		case <-tick.C:
		}
	}
}

// attack runs hostileClients clients of one kind against addr, each
// reconnecting once its connection fails, until the test ends; it returns
// once every one has attacked once. Connections and reconnections are
// spread over attackPace and more, at random: holding is what is tested,
// not 64 scrapes asked at the same instant, which --web.max-requests
// answers 503 by design.
func attack(t *testing.T, addr string, kind hostile) {
	t.Helper()
	stop := make(chan struct{})
	var started, done sync.WaitGroup
	started.Add(hostileClients)
	for range hostileClients {
		done.Add(1)
		go func() {
			defer done.Done()
			var once sync.Once
			ready := func() { once.Do(started.Done) }
			defer ready()
			select {
			case <-stop:
				return
			case <-time.After(rand.N(attackPace)):
			}
			for {
				if conn, err := net.DialTimeout("tcp", addr, 10*time.Second); err == nil {
					if tc, ok := conn.(*net.TCPConn); ok {
						tc.SetReadBuffer(4096)
					}
					go func() { <-stop; conn.Close() }()
					kind(conn, ready, stop)
					conn.Close()
				}
				select {
				case <-stop:
					return
				case <-time.After(attackPace + rand.N(2*attackPace)):
				}
			}
		}()
	}
	t.Cleanup(func() { close(stop); done.Wait() })
	started.Wait()
}

// basicAuthConfig writes a web config with basic auth and no TLS.
func basicAuthConfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "web.yml")
	if err := os.WriteFile(path, []byte("basic_auth_users:\n  "+scrapeUser+": "+scrapeHash+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestHostileClientsDoNotLockOutScrapes(t *testing.T) {
	for _, tc := range []struct {
		name string
		kind hostile
	}{
		{"item 2: a promised body that never comes", bodyHeld},
		{"item 3: pipelined scrapes never read", pipeliner},
		{"item 4: keep-alive squatters asking cheap requests", squatter},
	} {
		for _, auth := range []bool{false, true} {
			name := tc.name
			if auth {
				name += ", basic auth"
			}
			t.Run(name, func(t *testing.T) {
				// A read timeout longer than the test: what a client holds
				// waiting for a body is not given back by the timeout.
				args := []string{"--path.procfs=" + fixtureDir(t, "spark"), noGPU, "--no-collector.thermal", "--web.read-timeout=1m"}
				if auth {
					args = append(args, "--web.config.file="+basicAuthConfig(t))
				}
				p := testexporter.Start(t, nil, args...)
				attack(t, strings.TrimPrefix(p.URL, "http://"), tc.kind)
				client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
				tick := time.NewTicker(time.Second)
				defer tick.Stop()
				for scrape := range 5 {
					<-tick.C
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+"/metrics", nil)
					if auth {
						req.SetBasicAuth(scrapeUser, scrapePassword)
					}
					resp, err := client.Do(req)
					if err == nil {
						_, err = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
					cancel()
					switch {
					case err != nil:
						t.Errorf("scrape %d beside %d hostile clients: %v", scrape, hostileClients, err)
					case resp.StatusCode != http.StatusOK:
						t.Errorf("scrape %d beside %d hostile clients: %s", scrape, hostileClients, resp.Status)
					}
				}
				// Peak memory, for docs/robustness.md: a figure, not a test.
				if status, err := os.ReadFile("/proc/" + strconv.Itoa(p.PID()) + "/status"); err == nil {
					for _, line := range strings.Split(string(status), "\n") {
						if strings.HasPrefix(line, "VmHWM:") {
							t.Log("exporter's peak RSS:", strings.TrimSpace(strings.TrimPrefix(line, "VmHWM:")))
						}
					}
				}
			})
		}
	}
}
