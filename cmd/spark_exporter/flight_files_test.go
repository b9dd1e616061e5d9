package main

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/flight"
	"github.com/spark-exporter/spark_exporter/internal/safetext"
	"github.com/spark-exporter/spark_exporter/internal/testing/otheruser"
	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
)

// zeroDevice is a copy of /dev/zero (char 1,5) made with mknod at path.
func zeroDevice(t *testing.T, path string, mode uint32) {
	t.Helper()
	if err := syscall.Mknod(path, syscall.S_IFCHR|mode, 1<<8|5); err != nil {
		t.Skipf("mknod: %v (needs CAP_MKNOD)", err)
	}
}

// fileState is what a test checks stayed as it was: the type and mode,
// and for a regular file its bytes.
type fileState struct {
	mode os.FileMode
	data []byte
}

func stateOf(t *testing.T, path string) fileState {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	s := fileState{mode: fi.Mode()}
	if fi.Mode().IsRegular() {
		if s.data, err = os.ReadFile(path); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// --flight.file changes no file the exporter did not create: an operator's
// text file, a device, a link another user planted (in the last component
// or in a directory of the path), a FIFO. Each is refused with one log line
// that says what was found, without the path; the exporter listens, the
// scrape answers, the failure counted.
func TestFlightFileChangesNoFileItDidNotCreate(t *testing.T) {
	text := bytes.Repeat([]byte("an operator's notes, not a ring\n"), 3403)
	cases := []struct {
		name  string
		setup func(t *testing.T) (flag, watched string)
		log   string
	}{
		{"text file", func(t *testing.T) (string, string) {
			path := filepath.Join(t.TempDir(), "notes.txt")
			if err := os.WriteFile(path, text, 0o644); err != nil {
				t.Fatal(err)
			}
			return path, path
		}, "108896 bytes that are not a flight ring"},
		{"char device", func(t *testing.T) (string, string) {
			path := filepath.Join(t.TempDir(), "zero")
			zeroDevice(t, path, 0o666)
			return path, path
		}, "a character device, not a regular file"},
		{"FIFO", func(t *testing.T) (string, string) {
			path := filepath.Join(t.TempDir(), "fifo")
			if err := syscall.Mkfifo(path, 0o644); err != nil {
				t.Fatal(err)
			}
			return path, path
		}, "a named pipe, not a regular file"},
		{"link planted by another user", func(t *testing.T) (string, string) {
			target := filepath.Join(t.TempDir(), "root-owned")
			if err := os.WriteFile(target, text, 0o600); err != nil {
				t.Fatal(err)
			}
			link := filepath.Join(otheruser.Dir(t), "flight")
			if out, err := otheruser.Command(t, "ln", "-s", target, link).CombinedOutput(); err != nil {
				t.Fatalf("ln as nobody: %v %s", err, out)
			}
			return link, target
		}, "a symbolic link, not followed"},
		{"directory link planted by another user", func(t *testing.T) (string, string) {
			dir := t.TempDir()
			link := filepath.Join(otheruser.Dir(t), "state")
			if out, err := otheruser.Command(t, "ln", "-s", dir, link).CombinedOutput(); err != nil {
				t.Fatalf("ln as nobody: %v %s", err, out)
			}
			return filepath.Join(link, "flight"), dir
		}, "a symbolic link in its path that another user owns"},
		{"directory others may write", func(t *testing.T) (string, string) {
			dir := filepath.Join(t.TempDir(), "open")
			if err := os.Mkdir(dir, 0o777); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, 0o777); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(dir, "flight"), dir
		}, "a directory on its path others may write"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			flag, watched := c.setup(t)
			before := stateOf(t, watched)
			p := testexporter.Start(t, nil, "--path.procfs="+fixtureDir(t, "spark"), "--path.sysfs="+sysFixture(t, "spark"),
				noGPU, noKmsg, "--flight.file="+flag, "--flight.size=64KiB")
			m := p.Get(t, "/metrics")
			if v, ok := testexporter.Value(m, "spark_flight_write_errors_total"); !ok || v != 1 {
				t.Errorf("spark_flight_write_errors_total = %v (%v), want 1", v, ok)
			}
			if v, ok := testexporter.Value(m, `spark_scrape_collector_success{collector="pool"}`); !ok || v != 1 {
				t.Errorf("the pool collector: success %v (%v)", v, ok)
			}
			p.Stop(t)
			after := stateOf(t, watched)
			if after.mode != before.mode || !bytes.Equal(after.data, before.data) {
				t.Errorf("the file changed: mode %v → %v, %d → %d bytes", before.mode, after.mode, len(before.data), len(after.data))
			}
			if fi, err := os.Lstat(filepath.Join(watched, "flight")); err == nil {
				t.Errorf("a file was made behind the link: %v", fi.Mode())
			}
			logs := p.Logs()
			if !strings.Contains(logs, c.log) || strings.Contains(logs, flag) || strings.Contains(logs, watched) {
				t.Errorf("the log does not say %q, or names the path:\n%s", c.log, logs)
			}
		})
	}
}

// reportFlightOn runs `report --flight file` on the built binary, killed
// after a minute (a hang), and returns its exit status, stderr and peak
// resident memory in MiB.
func reportFlightOn(t *testing.T, args ...string) (int, string, string, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := testexporter.Command(t, append([]string{"report", "--flight"}, args...)...)
	cmd := exec.CommandContext(ctx, c.Path, c.Args[1:]...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	startSmall(t)
	if err := cmd.Run(); err != nil && cmd.ProcessState == nil {
		t.Fatal(err)
	}
	if ctx.Err() != nil {
		t.Fatalf("report --flight %v did not end within a minute", args)
	}
	var rss int64
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		rss = ru.Maxrss >> 10
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String(), rss
}

// report --flight checks what it reads before it reads much: a device
// without end, a FIFO with no writer and a 10 GB sparse file are refused at
// once (exit 1: the source cannot be read), within 64 MiB.
func TestReportFlightChecksTheFileFirst(t *testing.T) {
	dir := t.TempDir()
	zero := filepath.Join(dir, "zero")
	zeroDevice(t, zero, 0o644)
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	sparse := filepath.Join(dir, "sparse")
	if out, err := exec.Command("truncate", "-s", "10G", sparse).CombinedOutput(); err != nil {
		t.Fatalf("truncate: %v %s", err, out)
	}
	for _, c := range []struct{ file, want string }{
		{zero, "a character device, not a regular file"}, {fifo, "a named pipe, not a regular file"},
		{sparse, flight.ErrNotFlight.Error()},
	} {
		t.Run(filepath.Base(c.file), func(t *testing.T) {
			code, _, stderr, rss := reportFlightOn(t, c.file)
			if code != reportFailed || !strings.Contains(stderr, c.want) || strings.Contains(stderr, dir) {
				t.Errorf("exit %d, want %d saying %q without the path:\n%s", code, reportFailed, c.want, stderr)
			}
			if rss > 64 {
				t.Errorf("peak resident memory %d MiB, over 64 MiB", rss)
			}
		})
	}
}

// Names in the flight file (a workload's kind comes from a process's
// command line) are text from elsewhere: no escape sequence or bell reaches
// the terminal, a JSON value or the SVG, which stays XML.
func TestReportFlightStripsNames(t *testing.T) {
	const hostile = "vllm\x1b]0;pwned\x07\u202e"
	path := filepath.Join(t.TempDir(), "flight")
	r, err := flight.Open(path, flight.MinSize)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now().Add(-time.Hour)
	for i := range 5 {
		usable := uint64(50 << 30)
		r.Append(flight.Record{Time: start.Add(time.Duration(i) * 5 * time.Second), Boot: [16]byte{7},
			Pool:      &flight.Pool{Available: usable, Usable: &usable},
			GPU:       &flight.GPU{TemperatureCelsius: 60, PowerWatts: 50, SMClockHertz: 2e9, State: "cool\x1b[2J"},
			Workloads: []flight.Workload{{Role: "inference\x1b[31m", Kind: hostile, ResidentBytes: uint64(i+1) << 30}}})
	}
	r.Close()
	svg := filepath.Join(t.TempDir(), "f.svg")
	code, text, stderr, _ := reportFlightOn(t, path, "--svg", svg)
	if code != reportMade {
		t.Fatalf("exit %d:\n%s", code, stderr)
	}
	if strings.ContainsAny(text, "\x1b\x07\u202e") || !strings.Contains(text, "Grew most: inference[31m vllm]0;pwned") {
		t.Errorf("the text carries ESC, BEL or a bidi override, or lost the name's printable part:\n%q", text)
	}
	code, js, stderr, _ := reportFlightOn(t, path, "--json")
	var got struct {
		Grew struct{ Role, Kind string }
		GPU  struct{ State string }
	}
	if err := json.Unmarshal([]byte(js), &got); code != reportMade || err != nil {
		t.Fatalf("--json: exit %d, %v\n%s", code, err, stderr)
	}
	for _, s := range []string{got.Grew.Role, got.Grew.Kind, got.GPU.State} {
		if safetext.Index(s) >= 0 || s == "" {
			t.Errorf("a JSON name is %q", s)
		}
	}
	data, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.ContainsAny(data, "\x1b\x07") {
		t.Error("the SVG carries ESC or BEL")
	}
	d := xml.NewDecoder(bytes.NewReader(data))
	for {
		if _, err := d.Token(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("the SVG is not XML: %v", err)
		}
	}
}
