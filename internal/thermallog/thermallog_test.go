package thermallog

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf16"
)

func ptr[T any](v T) *T { return &v }

var at = time.Date(2025, 11, 24, 14, 8, 55, 751_000_000, time.Local)

func TestFormatIsNvidiaSmis(t *testing.T) {
	for _, tc := range []struct {
		row  Row
		want string
	}{
		// An example row of nvidia-smi's log.
		{Row{Time: at, Temperature: ptr(38.0), Power: ptr(12.34)}, "2025/11/24 14:08:55.751, 38, 12.34 W"},
		{Row{Time: at, Temperature: ptr(91.4), Power: ptr(100.005)}, "2025/11/24 14:08:55.751, 91, 100.00 W"},
		{Row{Time: at, Temperature: ptr(38.0)}, "2025/11/24 14:08:55.751, 38, [N/A]"},
		{Row{Time: at}, "2025/11/24 14:08:55.751, [N/A], [N/A]"},
	} {
		if got := Format(tc.row); got != tc.want {
			t.Errorf("Format = %q, want %q", got, tc.want)
		}
	}
}

func TestParse(t *testing.T) {
	in := `# a comment
timestamp, temperature.gpu, power.draw [W], utilization.gpu [%], clocks.current.sm [MHz], clocks_event_reasons.active, pstate
2025/11/24 14:08:55.751, 38, 12.34 W, 97 %, 2405 MHz, 0x0000000000000040, P0

2025/11/24 14:09:00.750, [N/A], [N/A], [Not Supported], [N/A], [N/A], P8
`
	tr, err := Parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Comments) != 1 || tr.Comments[0] != "a comment" {
		t.Errorf("comments %q", tr.Comments)
	}
	if len(tr.Rows) != 2 {
		t.Fatalf("%d rows, want 2", len(tr.Rows))
	}
	r := tr.Rows[0]
	if !r.Time.Equal(at) || *r.Temperature != 38 || *r.Power != 12.34 || *r.Utilization != 0.97 ||
		*r.SMClock != 2405e6 || *r.Reasons != 0x40 {
		t.Errorf("row 1: %+v", r)
	}
	r = tr.Rows[1]
	if r.Temperature != nil || r.Power != nil || r.Utilization != nil || r.SMClock != nil || r.Reasons != nil {
		t.Errorf("row 2: [N/A] fields must be absent: %+v", r)
	}
}

// Without a header, a log is the three columns (nvidia-smi's
// noheader output).
func TestParseWithoutHeader(t *testing.T) {
	tr, err := Parse(strings.NewReader("2025/11/24 14:08:55.751, 38, 12.34 W\n"))
	if err != nil || len(tr.Rows) != 1 || *tr.Rows[0].Power != 12.34 {
		t.Fatalf("%+v, %v", tr, err)
	}
}

func TestParseRefusesMalformedRows(t *testing.T) {
	for _, in := range []string{
		"2025/11/24 14:08:55.751, 38\n",              // too few fields
		"yesterday, 38, 12.34 W\n",                   // bad timestamp
		"2025/11/24 14:08:55.751, hot, 12.34 W\n",    // bad number
		"2025/11/24 14:08:55.751, 38, -3 W\n",        // negative power
		"2025/11/24 14:08:55.751, NaN, 12 W\n",       // NaN
		"2025/11/24 14:08:55.751, 38, 12 W, 140 %\n", // not the header's width
		"temperature.gpu\n38\n",                      // no timestamp column
		"timestamp,utilization.gpu\n2025/11/24 14:08:55.751, 140 %\n",
		"timestamp,clocks_event_reasons.active\n2025/11/24 14:08:55.751, 64\n",
	} {
		if tr, err := Parse(strings.NewReader(in)); err == nil || len(tr.Rows) != 0 {
			t.Errorf("accepted %q: %+v", in, tr.Rows)
		} else if !strings.HasPrefix(err.Error(), "line ") {
			t.Errorf("error %q does not name the line", err)
		}
	}
}

// nvidia-smi's own CSV, in any column order it names, with units
// (--format=csv) or without (nounits), with per-reason flags and counters
// and columns the reader skips.
func TestParseNvidiaSmiColumns(t *testing.T) {
	in := `index, name, clocks.sm [MHz], power.draw.instant [W], utilization.gpu [%], timestamp, temperature.gpu, clocks_event_reasons.sw_thermal_slowdown, clocks_event_reasons.hw_thermal_slowdown, clocks_event_reasons_counters.sw_thermal_slowdown [us], fan.speed [%]
1, NVIDIA GB10, 1900 MHz, 88.50 W, 98 %, 2025/11/02 14:03:11.123, 91, Active, Not Active, 2500000 us, [N/A]
1, NVIDIA GB10, 1900, 88.5, 98, 2025/11/02 14:03:16, 91, Not Active, Not Active, 2500000, N/A
`
	tr, err := Parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.Rows) != 2 {
		t.Fatalf("%d rows, want 2", len(tr.Rows))
	}
	want := time.Date(2025, 11, 2, 14, 3, 11, 123_000_000, time.Local)
	for i, r := range tr.Rows {
		if *r.GPU != 1 || *r.SMClock != 1900e6 || *r.Power != 88.5 || *r.Utilization != 0.98 || *r.Temperature != 91 ||
			r.EventSeconds["sw_thermal_slowdown"] != 2.5 {
			t.Errorf("row %d: %+v", i+1, r)
		}
	}
	if !tr.Rows[0].Time.Equal(want) || !tr.Rows[1].Time.Equal(want.Add(5*time.Second-123*time.Millisecond)) {
		t.Errorf("times %v, %v", tr.Rows[0].Time, tr.Rows[1].Time)
	}
	if *tr.Rows[0].Reasons != 0x20 || *tr.Rows[1].Reasons != 0 {
		t.Errorf("reasons %#x, %#x; want sw_thermal_slowdown, then none", *tr.Rows[0].Reasons, *tr.Rows[1].Reasons)
	}
}

// A malformed line is skipped and named by its number; the lines around
// it are kept, never guessed at.
func TestParseSkipsMalformedLines(t *testing.T) {
	in := "2025/11/24 14:08:55.751, 38, 12.34 W\n" +
		"2025/11/24 14:09:00.751, 38\n" + // cut short
		"\n" +
		"2025/11/24 14:09:05.751, 39, 12.50 W\n" +
		"2025/11/24 14:09:10.751, 39 C, 12.50 W\n" // a unit nvidia-smi never prints
	tr, err := Parse(strings.NewReader(in))
	var malformed MalformedError
	if !errors.As(err, &malformed) || malformed.Total != 2 || malformed.Lines[0].Line != 2 || malformed.Lines[1].Line != 5 {
		t.Fatalf("error %v; want lines 2 and 5", err)
	}
	if len(tr.Rows) != 2 || len(tr.Skipped) != 2 || *tr.Rows[1].Temperature != 39 {
		t.Errorf("rows %d, skipped %v", len(tr.Rows), tr.Skipped)
	}
	if !strings.HasPrefix(err.Error(), "line 2: ") || !strings.Contains(err.Error(), "1 more") {
		t.Errorf("error %q", err)
	}
}

// What the writer writes, the parser reads back.
func TestWriterRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "thermal.log")
	w := NewWriter(path)
	rows := []Row{
		{Time: at, Temperature: ptr(38.0), Power: ptr(12.34)},
		{Time: at.Add(5 * time.Second), Temperature: ptr(39.0), Power: ptr(99.5)},
	}
	for _, r := range rows {
		if err := w.Append(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	want := Header + "\n2025/11/24 14:08:55.751, 38, 12.34 W\n2025/11/24 14:09:00.751, 39, 99.50 W\n"
	if string(data) != want {
		t.Errorf("file:\n%s\nwant:\n%s", data, want)
	}
	tr, err := Parse(strings.NewReader(string(data)))
	if err != nil || len(tr.Rows) != 2 || !tr.Rows[1].Time.Equal(rows[1].Time) || *tr.Rows[1].Power != 99.5 {
		t.Errorf("read back %+v, %v", tr, err)
	}
}

// A restarted exporter appends under the first header, and finishes a line
// that a crash cut short before writing its own.
func TestWriterAppendsAcrossRestarts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "thermal.log")
	row := Row{Time: at, Temperature: ptr(38.0), Power: ptr(12.34)}
	for range 2 {
		w := NewWriter(path)
		if err := w.Append(row); err != nil {
			t.Fatal(err)
		}
		w.Close()
	}
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString("2025/11/24 14:0") // cut short
	f.Close()
	w := NewWriter(path)
	if err := w.Append(row); err != nil {
		t.Fatal(err)
	}
	w.Close()

	data, _ := os.ReadFile(path)
	line := Format(row)
	want := Header + "\n" + line + "\n" + line + "\n2025/11/24 14:0\n" + line + "\n"
	if string(data) != want {
		t.Errorf("file:\n%s\nwant:\n%s", data, want)
	}
}

// An unwritable log is an error without the path, and writing resumes by
// itself once the file can be created.
func TestWriterUnwritableThenRecovers(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "not-yet")
	path := filepath.Join(dir, "thermal.log")
	w := NewWriter(path)
	defer w.Close()
	row := Row{Time: at, Temperature: ptr(38.0), Power: ptr(12.34)}
	err := w.Append(row)
	if err == nil {
		t.Fatal("writing into a missing directory succeeded")
	}
	if strings.Contains(err.Error(), dir) || strings.Contains(err.Error(), "thermal.log") {
		t.Errorf("error %q names the path", err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := w.Append(row); err != nil {
		t.Fatalf("after the directory appeared: %v", err)
	}
	data, _ := os.ReadFile(path)
	if string(data) != Header+"\n"+Format(row)+"\n" {
		t.Errorf("file:\n%s", data)
	}
}

func TestWriterRefusesADirectory(t *testing.T) {
	w := NewWriter(t.TempDir())
	if err := w.Append(Row{Time: at}); err == nil {
		t.Error("wrote to a directory")
	}
}

// A device is no log: /dev/full (every write fails), /dev/null (every
// write vanishes) are refused as they are opened.
func TestWriterRefusesADevice(t *testing.T) {
	for _, dev := range []string{"/dev/full", "/dev/null"} {
		if _, err := os.Stat(dev); err != nil {
			t.Skipf("%s: %v", dev, err)
		}
		w := NewWriter(dev)
		if err := w.Append(Row{Time: at}); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("%s: %v, want a refusal", dev, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add("timestamp,temperature.gpu,power.draw\n2025/11/24 14:08:55.751, 38, 12.34 W\n")
	f.Add("# c\ntimestamp, power.draw [W], clocks_event_reasons.active\n2025/11/24 14:08:55.751, [N/A], 0x40\n")
	f.Add("timestamp,utilization.gpu,clocks.sm\n2025/11/24 14:08:55.751, 97 %, 2405 MHz\n")
	f.Add("index, clocks.sm [MHz], timestamp, temperature.gpu, power.draw [W], clocks_event_reasons_counters.hw_thermal_slowdown [us]\n0, 1900 MHz, 2025/11/02 14:03:11.123, 91, 88.50 W, 12 us\n0, x\n")
	f.Add("2025/11/02 14:03:11, 91, 88.5\n2025/11/02 14:03:16, N/A, 88.5\n")
	f.Fuzz(func(t *testing.T, in string) {
		tr, err := Parse(strings.NewReader(in))
		var malformed MalformedError
		if err != nil && !errors.As(err, &malformed) {
			return
		}
		// Every line is a row, a comment, a header, blank or skipped,
		// and a skipped line is named by a line that exists.
		lines := strings.Count(in, "\n") + 1
		if len(tr.Rows)+tr.SkippedTotal > lines || malformed.Total != tr.SkippedTotal || len(tr.Skipped) > maxSkippedKept {
			t.Fatalf("%d rows and %d skipped from %d lines", len(tr.Rows), len(tr.Skipped), lines)
		}
		for _, e := range tr.Skipped {
			if e.Line < 1 || e.Line > lines {
				t.Fatalf("skipped line %d of %d", e.Line, lines)
			}
		}
		for _, r := range tr.Rows {
			if r.Time.IsZero() {
				t.Fatal("a row without a time")
			}
			for _, v := range r.EventSeconds {
				if v < 0 {
					t.Fatalf("negative counter: %+v", r)
				}
			}
			if r.Power != nil && *r.Power < 0 || r.Utilization != nil && (*r.Utilization < 0 || *r.Utilization > 1) {
				t.Fatalf("value out of range: %+v", r)
			}
		}
	})
}

// A symbolic link is not followed: its target (a copy of /etc/passwd, say)
// is left as it was.
func TestWriterRefusesASymlink(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "passwd")
	if err := os.WriteFile(target, []byte("root:x:0:0:root:/root:/bin/sh"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "samples.csv")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := NewWriter(link).Append(Row{Time: at}); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("a symlink: %v, want a refusal", err)
	}
	if data, _ := os.ReadFile(target); string(data) != "root:x:0:0:root:/root:/bin/sh" {
		t.Errorf("the link's target was written: %q", data)
	}
}

// A named pipe is refused at once, with or without a reader: the sampler
// never waits on it.
func TestWriterRefusesANamedPipe(t *testing.T) {
	path := filepath.Join(t.TempDir(), "samples.csv")
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := NewWriter(path).Append(Row{Time: at}); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a pipe without a reader: %v, want a refusal", err)
	}
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	if err := NewWriter(path).Append(Row{Time: at}); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a pipe with a reader: %v, want a refusal", err)
	}
}

// The reader with what a log may not say itself (its zone, the interval of
// a log without timestamps), on nvidia-smi dmon, ISO 8601, epoch seconds
// and local times around a fall-back: no panic; every row timed, inside
// the plausible ranges; a log without timestamps is timed from the epoch.
func FuzzParseOptions(f *testing.F) {
	f.Add("#Date       Time        gpu    pwr  gtemp  mtemp     sm    mem   mclk   pclk\n 20240212   14:31:06      0     69     41      -      0      0   6001   1410\n")
	f.Add("# gpu   pwr gtemp mtemp    sm   mem   enc   dec  mclk  pclk\n# Idx     W     C     C     %     %     %     %   MHz   MHz\n    0    70    48     -     5     1     0     0  7000  1350\n    1    68    48     -    11     1     0     0  7000  1350\n")
	f.Add("timestamp, name, index, temperature.gpu, power.draw [W], power.limit [W]\n2025-11-24T14:08:55+01:00, NVIDIA GB10, 0, 38, 12.34 W, [N/A]\n1732457335.5, NVIDIA GB10, 0, 39, 12.5 W, [N/A]\n")
	f.Add("2025/10/26 02:59:55.000, 70, 98 W\n2025/10/26 02:00:00.000, 70, 98 W\n2025/10/26 02:00:05.000, 71, 98 W\n")
	f.Add("uuid, temperature.gpu, power.draw\nGPU-1, 50, 100\nGPU-2, 51, 101\n")
	f.Add("hello, world\n")
	f.Add("20260830T155438Z, 96 %, 57, 2405 MHz, [N/A], 35.81 W\n20260830t155448.5+0200, 96 %, 57, 2405 MHz, [N/A], 35.81 W\n")
	f.Add("timestamp, temperature.gpu, power.draw\n2026-08-30T15:54:38.5+02, 57, 35.81 W\n20260830T155438, 57, 35.81 W\n")
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		berlin = time.UTC
	}
	f.Fuzz(func(t *testing.T, in string) {
		tr, err := ParseOptions(strings.NewReader(in), Options{Location: berlin, Interval: time.Second})
		var malformed MalformedError
		if err != nil && !errors.As(err, &malformed) {
			var format *FormatError
			if !errors.As(err, &format) {
				t.Fatalf("an error of neither kind: %v", err)
			}
			return
		}
		for _, r := range tr.Rows {
			switch {
			case r.Time.IsZero():
				t.Fatal("a row without a time")
			case tr.Relative && r.Time.Before(time.Unix(0, 0)):
				t.Fatalf("a row timed before the epoch: %v", r.Time)
			case r.Temperature != nil && (*r.Temperature < MinTemperature || *r.Temperature > MaxTemperature):
				t.Fatalf("temperature %v out of range", *r.Temperature)
			case r.Power != nil && (*r.Power < 0 || *r.Power > MaxPower):
				t.Fatalf("power %v out of range", *r.Power)
			case r.Line < 1:
				t.Fatalf("row without its line: %+v", r)
			}
		}
	})
}

// A log without a header is the guide's three columns only when its values
// can be: a clock of 890 where the temperature goes, a clock in MHz or a
// share in % refuse the whole log, naming the column, never "peak 890 °C".
func TestHeaderlessColumnsAreChecked(t *testing.T) {
	for in, want := range map[string]string{
		"2026/08/30 13:52:29.943, 890, 96\n":          "line 1: temperature.gpu: 890 °C is out of range",
		"2026/08/30 13:52:29.943, 890 MHz, 96 %\n":    `line 1: temperature.gpu reads "890 MHz"`,
		"2026/08/30 13:52:29.943, 45, 2400\n":         "line 1: power.draw: 2400 W is out of range",
		"2026/08/30 13:52:29.943, 45, 40 %\n":         `line 1: power.draw reads "40 %"`,
		"2026/08/30 13:52:29.943, 45, 2400, 1, 2\n":   "line 1: no header line, and 5 fields",
		"gpu_id, clock_mhz, util\n0, 2400, 96\n":      "line 1: a header naming no column the report reads (found gpu_id, clock_mhz, util",
		"# gpu pwr gtemp sm\n0 100 50 90\n":           "nvidia-smi dmon without -o DT prints no timestamps",
		"index, temperature.gpu, power.draw\n0,1,2\n": "the header names no timestamp column",
	} {
		_, err := Parse(strings.NewReader(in))
		var format *FormatError
		if !errors.As(err, &format) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v; want a FormatError saying %q", in, err, want)
		}
	}
}

// ISO 8601 with its offset, Unix seconds, and nvidia-smi's local time in
// the zone given; the offsets are kept.
func TestParseTimestamps(t *testing.T) {
	tokyo := time.FixedZone("JST", 9*3600)
	in := "2025-11-24T14:08:55+01:00, 38, 12 W\n1764000000.5, 38, 12 W\n2025/11/24 14:08:55.751, 38, 12 W\n2025-11-24 14:08:56, 38, 12 W\n"
	tr, err := ParseOptions(strings.NewReader(in), Options{Location: tokyo})
	if err != nil || len(tr.Rows) != 4 {
		t.Fatalf("%d rows, %v", len(tr.Rows), err)
	}
	for i, want := range []string{"2025-11-24T14:08:55+01:00", "2025-11-25T01:00:00.5+09:00", "2025-11-24T14:08:55.751+09:00", "2025-11-24T14:08:56+09:00"} {
		if got := tr.Rows[i].Time.Format(time.RFC3339Nano); got != want {
			t.Errorf("row %d at %s, want %s", i+1, got, want)
		}
	}
}

// RFC 3339 and ISO 8601, basic and extended, with or without a fraction
// and an offset (Z, ±hh, ±hhmm, ±hh:mm): the forms
// harnesses write (20260830T155438Z from a GB10 harness log).
func TestParseISO8601Timestamps(t *testing.T) {
	tokyo := time.FixedZone("JST", 9*3600)
	for in, want := range map[string]string{
		"2026-08-30T15:54:38Z":           "2026-08-30T15:54:38Z",
		"2026-08-30t15:54:38.25z":        "2026-08-30T15:54:38.25Z",
		"2026-08-30T15:54:38.5+02:00":    "2026-08-30T15:54:38.5+02:00",
		"2026-08-30T15:54:38.123-0700":   "2026-08-30T15:54:38.123-07:00",
		"2026-08-30T15:54:38+02":         "2026-08-30T15:54:38+02:00",
		"2026-08-30 15:54:38.5+05:30":    "2026-08-30T15:54:38.5+05:30",
		"2026-08-30T15:54:38.5":          "2026-08-30T15:54:38.5+09:00",
		"20260830T155438Z":               "2026-08-30T15:54:38Z",
		"20260830T155438.123Z":           "2026-08-30T15:54:38.123Z",
		"20260830T155438+0200":           "2026-08-30T15:54:38+02:00",
		"20260830T155438-02:30":          "2026-08-30T15:54:38-02:30",
		"20260830T155438+02":             "2026-08-30T15:54:38+02:00",
		"20260830T155438":                "2026-08-30T15:54:38+09:00",
		"20260830t155438.75":             "2026-08-30T15:54:38.75+09:00",
		"2026-08-30T15:54:38.123456789Z": "2026-08-30T15:54:38.123456789Z",
	} {
		tr, err := ParseOptions(strings.NewReader(in+", 57, 35.81 W\n"), Options{Location: tokyo})
		if err != nil || len(tr.Rows) != 1 {
			t.Errorf("%s: %d rows, %v", in, len(tr.Rows), err)
			continue
		}
		if got := tr.Rows[0].Time.Format(time.RFC3339Nano); got != want {
			t.Errorf("%s read as %s, want %s", in, got, want)
		}
	}
	for _, in := range []string{"2026-08-30T25:54:38Z", "20260830T155438ZZ", "20260830 155438", "2026083T155438Z"} {
		if tr, err := ParseOptions(strings.NewReader(in+", 57, 35.81 W\n"), Options{Location: tokyo}); err == nil || len(tr.Rows) != 0 {
			t.Errorf("%s read as %v", in, tr.Rows)
		}
	}
	cols, err := ParseColumns("timestamp,utilization.gpu,temperature.gpu,clocks.sm,memory.used,power.draw")
	if err != nil {
		t.Fatal(err)
	}
	harness := "20260830T155438Z, 96 %, 57, 2405 MHz, [N/A], 35.81 W\n20260830T155448Z, 96 %, 58, 2405 MHz, [N/A], 36.02 W\n"
	tr, err := ParseOptions(strings.NewReader(harness), Options{Location: tokyo, Columns: cols})
	if err != nil || len(tr.Rows) != 2 || tr.Rows[1].Time.Sub(tr.Rows[0].Time) != 10*time.Second || *tr.Rows[0].SMClock != 2405e6 {
		t.Errorf("the harness log: %v %+v", err, tr.Rows)
	}
}

// The captures people make. A harness header with its own
// names, --columns over a noheader capture or a header, Not Supported as
// an absent value, a UTF-16 file with its BOM; malformed lines named up to
// maxSkippedKept and counted; timestamps outside the years a Duration
// spans are malformed.
func TestParseCaptures(t *testing.T) {
	harness := "elapsed_s,power_w,temp_c,sm_mhz,gpu_util,mem_used_mb\n10,39.08,57,2509,96,117944\n20,39.63,59,2509,96,117729\n"
	tr, err := Parse(strings.NewReader(harness))
	if err != nil || len(tr.Rows) != 2 || !tr.Relative || !tr.Elapsed || tr.Rows[1].Time.Unix() != 20 ||
		*tr.Rows[0].Temperature != 57 || *tr.Rows[0].SMClock != 2509e6 || *tr.Rows[0].Utilization != 0.96 {
		t.Errorf("harness: %v %+v", err, tr)
	}
	cols, err := ParseColumns("timestamp,clocks.sm,temperature.gpu,power.draw,memory.used")
	if err != nil {
		t.Fatal(err)
	}
	noheader := "2025/11/24 14:00:00.000, 2450 MHz, 70, 88.00 W, Not Supported\n2025/11/24 14:00:05.000, [N/A], 71, 88.50 W, [N/A]\n"
	for _, in := range []string{noheader, "timestamp, power.draw [W], temperature.gpu, clocks.sm [MHz], x\n" + noheader} {
		tr, err = ParseOptions(strings.NewReader(in), Options{Location: time.UTC, Columns: cols})
		if err != nil || len(tr.Rows) != 2 || *tr.Rows[1].Power != 88.5 || tr.Rows[1].SMClock != nil {
			t.Errorf("--columns: %v %+v", err, tr.Rows)
		}
	}
	if _, err := ParseColumns("a b, c"); err == nil {
		t.Error("--columns with a space in a name accepted")
	}
	var be bytes.Buffer
	be.Write([]byte{0xFE, 0xFF})
	for _, u := range utf16.Encode([]rune("2025/11/24 14:00:00.000, 70, 88.00 W\n")) {
		be.Write([]byte{byte(u >> 8), byte(u)})
	}
	if tr, err := ParseOptions(&be, Options{Location: time.UTC}); err != nil || len(tr.Rows) != 1 {
		t.Errorf("UTF-16BE: %v %+v", err, tr)
	}
	var bad strings.Builder
	bad.WriteString("0005-01-01T00:00:00Z, 50, 90 W\n")
	for i := 0; i < 100; i++ {
		bad.WriteString("2025-11-24T14:00:00Z, oops\n")
	}
	tr, err = Parse(strings.NewReader(bad.String()))
	var malformed MalformedError
	if !errors.As(err, &malformed) || malformed.Total != 101 || len(tr.Skipped) != maxSkippedKept ||
		!strings.Contains(tr.Skipped[0].Err.Error(), "year 5 is outside 1950–2199") {
		t.Errorf("%v; %d kept", err, len(tr.Skipped))
	}
}
