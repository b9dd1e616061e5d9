package dockerapi

import (
	"github.com/spark-exporter/spark_exporter/internal/container"

	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// dockerAnswer is GET /containers/json as the Docker Engine API v1.47
// documents it ("List containers", the example response), trimmed to the
// fields read and given a Compose label as Compose v2 sets it.
const dockerAnswer = `[
 {"Id": "8dfafdbc3a40f1a5b7d2d4a8bb7c3f9b0e1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e",
  "Names": ["/vllm-1"], "Image": "vllm/vllm-openai:latest", "ImageID": "sha256:ab",
  "Command": "python3 -m vllm.entrypoints.openai.api_server", "State": "running",
  "Labels": {"com.docker.compose.project": "spark", "com.docker.compose.service": "vllm"}},
 {"Id": "9cd87474be90a1b2c3d4e5f60718293a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e",
  "Names": ["/ollama"], "Image": "ollama/ollama", "Labels": {}},
 {"Id": "short", "Names": ["/bad"], "Image": "x"},
 {"Id": "3176a2479c92a1b2c3d4e5f60718293a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e",
  "Names": ["/evil\u001b[2J"], "Image": "` + "x" + `"}
]`

// fakeDocker serves handler on a Unix socket in a temporary directory, as
// dockerd serves /var/run/docker.sock.
func fakeDocker(t *testing.T, handler http.HandlerFunc) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "docker")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	socket := filepath.Join(dir, "docker.sock")
	l, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: handler}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return socket
}

func TestDockerContainers(t *testing.T) {
	var calls atomic.Int32
	socket := fakeDocker(t, func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if r.URL.Path != "/containers/json" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(dockerAnswer))
	})
	d := NewDocker(socket)
	now := time.Unix(1e9, 0)
	infos, err := d.Containers(now)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]container.Info{
		"8dfafdbc3a40": {ID: "8dfafdbc3a40", Name: "vllm-1", Image: "vllm/vllm-openai:latest", ComposeService: "vllm"},
		"9cd87474be90": {ID: "9cd87474be90", Name: "ollama", Image: "ollama/ollama"},
		"3176a2479c92": {ID: "3176a2479c92", Image: "x"},
	}
	if len(infos) != len(want) {
		t.Errorf("got %d containers, want %d: %+v", len(infos), len(want), infos)
	}
	for id, w := range want {
		if infos[id] != w {
			t.Errorf("%s: got %+v, want %+v", id, infos[id], w)
		}
	}
	// Served again within MaxAge without asking.
	if _, err := d.Containers(now.Add(time.Second)); err != nil || calls.Load() != 1 {
		t.Errorf("second call within MaxAge: err %v, %d calls to the engine, want 1", err, calls.Load())
	}
	if _, err := d.Containers(now.Add(defaultMaxAge)); err != nil || calls.Load() != 2 {
		t.Errorf("after MaxAge: err %v, %d calls, want 2", err, calls.Load())
	}
}

func TestDockerFailures(t *testing.T) {
	t.Run("absent socket", func(t *testing.T) {
		d := NewDocker(filepath.Join(t.TempDir(), "none.sock"))
		if _, err := d.Containers(time.Now()); err == nil || strings.Contains(err.Error(), "http://docker") {
			t.Errorf("err %v: want an error without the made-up URL", err)
		}
	})
	t.Run("refused", func(t *testing.T) {
		socket := fakeDocker(t, func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "permission denied", http.StatusForbidden)
		})
		if _, err := NewDocker(socket).Containers(time.Now()); err == nil || !strings.Contains(err.Error(), "403") {
			t.Errorf("err %v: want the status", err)
		}
	})
	t.Run("too large", func(t *testing.T) {
		socket := fakeDocker(t, func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte("["))
			chunk := []byte(strings.Repeat(" ", 1<<20))
			for range maxBody>>20 + 1 {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		})
		if _, err := NewDocker(socket).Containers(time.Now()); err == nil || !strings.Contains(err.Error(), "larger") {
			t.Errorf("err %v: want the size cap", err)
		}
	})
	t.Run("stalled", func(t *testing.T) {
		release := make(chan struct{})
		socket := fakeDocker(t, func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		})
		defer close(release)
		d := NewDocker(socket)
		d.Timeout = 50 * time.Millisecond
		if _, err := d.Containers(time.Now()); err == nil {
			t.Error("a stalled engine gave no error")
		}
	})
}

func TestParseContainersBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString("[")
	for i := range maxContainers + 10 {
		if i > 0 {
			b.WriteString(",")
		}
		id := strings.Repeat("0", 56) + hex8(i)
		b.WriteString(`{"Id":"` + id + `","Names":["/c"],"Image":"i"}`)
	}
	b.WriteString("]")
	infos, err := parseContainers([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) > maxContainers {
		t.Errorf("%d containers kept, cap %d", len(infos), maxContainers)
	}
	if _, err := parseContainers([]byte(`{"message":"x"}`)); err == nil {
		t.Error("an object instead of a list gave no error")
	}
}

func hex8(i int) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 8)
	for j := 7; j >= 0; j-- {
		out[j] = digits[i&15]
		i >>= 4
	}
	return string(out)
}

func FuzzParseContainers(f *testing.F) {
	f.Add([]byte(dockerAnswer))
	f.Add([]byte(`[{"Id":1}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		infos, _ := parseContainers(data)
		for id, info := range infos {
			if id != info.ID || len(id) != container.ShortIDLength || container.Label(info.Name) != info.Name || container.Label(info.Image) != info.Image {
				t.Errorf("unsafe info %+v", info)
			}
		}
	})
}
