// Package dockerapi names containers from the Docker Engine API's
// GET /containers/json, cached, bounded and with a deadline.
package dockerapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/container"
)

// A host with more containers than maxContainers is not a Spark running a
// few engines. Containers start and stop far less often than Prometheus scrapes.
const (
	maxBody        = 8 << 20
	maxContainers  = 1000
	defaultTimeout = 2 * time.Second
	defaultMaxAge  = 30 * time.Second
)

// Docker keeps the Docker Engine's answer for MaxAge.
type Docker struct {
	client  *http.Client
	Timeout time.Duration
	MaxAge  time.Duration

	mu    sync.Mutex
	at    time.Time
	infos map[string]container.Info
	err   error
}

func NewDocker(socket string) *Docker {
	transport := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		DisableKeepAlives:      true,
		MaxResponseHeaderBytes: 64 << 10,
	}
	return &Docker{
		client: &http.Client{Transport: transport,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		Timeout: defaultTimeout, MaxAge: defaultMaxAge,
	}
}

// Containers keeps an error as long as an answer, so that a missing engine
// costs one attempt per MaxAge, not one per scrape.
func (d *Docker) Containers(now time.Time) (map[string]container.Info, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.at.IsZero() && now.Sub(d.at) < d.MaxAge && now.After(d.at.Add(-time.Second)) {
		return d.infos, d.err
	}
	d.infos, d.err = d.list()
	d.at = now
	return d.infos, d.err
}

func (d *Docker) list() (map[string]container.Info, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://docker/containers/json", nil)
	if err != nil {
		return nil, err
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("docker engine: %w", withoutURL(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("docker engine: GET /containers/json answered %s", resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return nil, fmt.Errorf("docker engine: reading the answer: %w", withoutURL(err))
	}
	if len(body) > maxBody {
		return nil, fmt.Errorf("docker engine: answer larger than %d MiB", maxBody>>20)
	}
	return parseContainers(body)
}

func withoutURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

func parseContainers(body []byte) (map[string]container.Info, error) {
	var list []struct {
		ID     string            `json:"Id"`
		Names  []string          `json:"Names"`
		Image  string            `json:"Image"`
		Labels map[string]string `json:"Labels"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("docker engine: the answer is not a list of containers: %w", err)
	}
	infos := make(map[string]container.Info, min(len(list), maxContainers))
	for _, c := range list {
		if len(infos) == maxContainers {
			break
		}
		id, ok := container.ShortID(c.ID)
		if !ok {
			continue
		}
		info := container.Info{ID: id, Image: container.Label(c.Image), ComposeService: container.Label(c.Labels["com.docker.compose.service"])}
		if len(c.Names) > 0 {
			info.Name = container.Label(strings.TrimPrefix(c.Names[0], "/"))
		}
		infos[info.ID] = info
	}
	return infos, nil
}
