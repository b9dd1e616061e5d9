package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/spark-exporter/spark_exporter/internal/status"
	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
)

// Issue 28: what `status` and `report` take from a server, bounded and
// made harmless.

// statusServer serves model at the status API on 127.0.0.1; check, if not
// nil, sees every request first and may answer it itself.
func statusServer(t *testing.T, body []byte, check func(w http.ResponseWriter, r *http.Request) bool) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if check != nil && !check(w, r) {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func hostileModel(t *testing.T) []byte {
	t.Helper()
	hostile := "GB10\x1b[2J\x1b[H\u202egnilttorhT\nPool     all fine"
	m := status.Model{APIVersion: status.APIVersion, GeneratedAt: "2025-11-24T14:00:00Z" + hostile,
		Exporter: status.Exporter{Version: hostile}, NVML: status.NVML{Text: hostile},
		GPUs:       []status.GPU{{Index: 0, Name: hostile}},
		Collectors: []status.Collector{{Name: hostile, Success: false}}}
	data, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// Issue 28, item 9: a hostile or intercepted server's strings (GPU name,
// verdicts, collector names) reach the terminal without the escapes that
// would clear it or the override that would reverse a word, and without
// a newline that would start a line of their own.
func TestStatusStripsServerStrings(t *testing.T) {
	srv := statusServer(t, hostileModel(t), nil)
	out, err := testexporter.Command(t, "status", "--url="+srv.URL).CombinedOutput()
	if err != nil {
		t.Fatalf("status: %v\n%s", err, out)
	}
	for _, bad := range []string{"\x1b", "\u202e", "\nPool     all fine"} {
		if strings.Contains(string(out), bad) {
			t.Errorf("status printed %q:\n%q", bad, out)
		}
	}
	if !strings.Contains(string(out), "GB10[2J[H") {
		t.Errorf("the GPU's printable name is gone:\n%s", out)
	}
}
