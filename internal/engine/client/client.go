// Package client asks inference engines on loopback for their own account (an engine.Reading).
package client

import (
	"github.com/spark-exporter/spark_exporter/internal/engine"

	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

const (
	// defaultTimeout includes reading the answer: one that trickles is given up.
	defaultTimeout = 2 * time.Second
	// maxBody: vLLM's /metrics, histograms and all, is tens of kB per model.
	maxBody = 4 << 20
	// maxPSBody: /api/ps is a few hundred bytes a model.
	maxPSBody = 1 << 20
)

// Problems never quote the answer's text.
const (
	problemNeedsKey = "the engine asks for a key: name its address with --engines.target and give the key with --engines.bearer-token-file"
	problemRedirect = "the engine answered with a redirect, which is not followed"
)

type Asker struct {
	client  *http.Client
	token   string
	Timeout time.Duration
}

// NewAsker asks with the bearer token token ("" for none).
func NewAsker(token string) *Asker {
	dialer := &net.Dialer{
		Timeout: defaultTimeout,
		// Checked where dialled: a name that resolves elsewhere is refused too.
		Control: func(_, address string, _ syscall.RawConn) error {
			host, _, err := net.SplitHostPort(address)
			if err != nil {
				return err
			}
			if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
				return errNotLoopback
			}
			return nil
		},
	}
	transport := &http.Transport{
		// Never a proxy from the environment: the question stays on this machine.
		Proxy:                  nil,
		DialContext:            dialer.DialContext,
		MaxIdleConnsPerHost:    1,
		IdleConnTimeout:        time.Minute,
		MaxResponseHeaderBytes: 64 << 10,
		ResponseHeaderTimeout:  defaultTimeout,
		DisableCompression:     true,
	}
	return &Asker{
		client: &http.Client{Transport: transport,
			CheckRedirect: func(*http.Request, []*http.Request) error { return errRedirect }},
		token:   strings.TrimSpace(token),
		Timeout: defaultTimeout,
	}
}

var (
	errNotLoopback = errors.New("not a loopback address")
	errRedirect    = errors.New("redirect")
)

// CheckAddress allows a loopback IP or localhost, and a port in 1–65535.
func CheckAddress(address string) error {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("%q is not host:port", address)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("port %q is not a number in 1–65535", port)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%q is not a loopback address: engines are asked on this machine only", host)
	}
	return nil
}

// Ask never fails: engine.Reading.Up and Problem say how it went.
func (a *Asker) Ask(ctx context.Context, t engine.Target, now time.Time) engine.Reading {
	ctx, cancel := context.WithTimeout(ctx, a.Timeout)
	defer cancel()
	resp, problem := a.get(ctx, t)
	if problem != "" {
		return engine.Reading{Target: t, At: now, Problem: problem}
	}
	defer resp.Body.Close()
	limit := int64(maxBody)
	if t.Kind == engine.KindOllama {
		limit = maxPSBody
	}
	body := &counted{r: io.LimitReader(resp.Body, limit+1)}
	r := engine.Reading{Target: t, At: now}
	var err error
	if t.Kind == engine.KindOllama {
		err = engine.ParseOllamaPS(body, &r)
	} else {
		err = parseMetrics(t.Kind, body, &r)
	}
	switch {
	case body.err != nil:
		problem = describe(body.err)
	case body.n > limit:
		problem = fmt.Sprintf("the answer is larger than %d MiB", limit>>20)
	case err != nil:
		problem = err.Error()
	}
	if problem != "" {
		return engine.Reading{Target: t, At: now, Problem: problem}
	}
	r.Up = true
	return r
}

// counted counts the bytes read and keeps the first error other than io.EOF.
type counted struct {
	r   io.Reader
	n   int64
	err error
}

func (c *counted) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if err != nil && err != io.EOF && c.err == nil {
		c.err = err
	}
	return n, err
}

// get: the caller closes the answer's body.
func (a *Asker) get(ctx context.Context, t engine.Target) (*http.Response, string) {
	u := url.URL{Scheme: "http", Host: t.Address, Path: t.Path()}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, "bad address"
	}
	if t.Kind != engine.KindOllama {
		req.Header.Set("Accept", "text/plain;version=0.0.4")
	}
	if a.token != "" && t.TakesKey() {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	resp, err := a.client.Do(req)
	if err != nil {
		return nil, describe(err)
	}
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		resp.Body.Close()
		return nil, problemNeedsKey
	case resp.StatusCode != http.StatusOK:
		resp.Body.Close()
		return nil, "the engine answered " + strconv.Itoa(resp.StatusCode) + " to GET " + t.Path()
	}
	return resp, ""
}

// describe's words carry no URL.
func describe(err error) string {
	switch {
	case errors.Is(err, errRedirect):
		return problemRedirect
	case errors.Is(err, errNotLoopback):
		return "the address is not on loopback"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, syscall.ETIMEDOUT):
		return "no answer within the deadline"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused: nothing listens at the engine's port"
	}
	var ue *url.Error
	if errors.As(err, &ue) && ue.Timeout() {
		return "no answer within the deadline"
	}
	return "the question failed"
}

func (a *Asker) Close() { a.client.CloseIdleConnections() }
