package kmsg

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spark-exporter/spark_exporter/internal/testing/testexporter"
)

func TestParse(t *testing.T) {
	rec, err := parse([]byte("6,339,5140900,-;NET: Registered protocol family 10\n"))
	if err != nil {
		t.Fatal(err)
	}
	if rec.Priority != 6 || rec.Facility != 0 || rec.Seq != 339 || rec.Since != 5140900*time.Microsecond || rec.Message != "NET: Registered protocol family 10" {
		t.Errorf("got %+v", rec)
	}
	if rec, err := parse([]byte("6,1,2;m")); err != nil || rec.Message != "m" {
		t.Errorf("a header without flags: %+v, %v", rec, err)
	}
	// A later kernel's extra header field (the caller id), a facility, and
	// a semicolon in the message.
	rec, err = parse([]byte("30,7,12,c,caller=T1;a;b"))
	if err != nil || rec.Facility != 3 || rec.Priority != 6 || rec.Message != "a;b" {
		t.Errorf("got %+v, %v", rec, err)
	}
	for _, bad := range []string{"", "no header", "6,1;x", "x,1,2,-;m", "6,-1,2,-;m", "6,1,99999999999999999999,-;m"} {
		if _, err := parse([]byte(bad)); err == nil {
			t.Errorf("Parse(%q) = nil error", bad)
		}
	}
}

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		msg  string
		want event
		ok   bool
	}{
		{"NVRM: Xid (PCI:000f:01:00): 79, pid=1, GPU has fallen off the bus.", event{Kind: xid, Code: 79}, true},
		{"NVRM: Xid (PCI:0000:01:00): 13, Graphics Exception", event{Kind: xid, Code: 13}, true},
		{"NVRM: Xid (PCI:0000:01:00): 1000, x", event{}, false},
		{"NVRM: Xid (PCI:0000:01:00): 0, x", event{}, false},
		{"NVRM: Xid (PCI:0000:01:00): 12abc", event{}, false},
		{"NVRM: Xid (PCI:0000:01:00) 13", event{}, false},
		{"NVRM: nvCheckOkFailedNoLog: Check failed: Out of memory [NV_ERR_NO_MEMORY] (0x00000051)", event{Kind: driverOutOfMemory}, true},
		{"somebody: NV_ERR_NO_MEMORY", event{}, false},
		{"NVRM: x: NV_ERR_NO_MEMORY", event{}, false},
		{"x 0000:01:00.0: PCIe Bus Error: severity=Corrected, type=Physical Layer", event{Kind: pcieAER, Severity: Corrected}, true},
		{"pcieport 0000:00:01.0: PCIe Bus Error: severity=Uncorrected (Non-Fatal), type=Transaction Layer, (Requester ID)", event{Kind: pcieAER, Severity: NonFatal}, true},
		{"nvme 0004:01:00.0: PCIe Bus Error: severity=Uncorrected (Fatal), type=Inaccessible, (Unregistered Agent ID)", event{Kind: pcieAER, Severity: Fatal}, true},
		{"x 0000:01:00.0: PCIe Bus Error: severity=Weird, type=x", event{}, false},
		{"x 0000:01:00.0: PCIe Bus Error: severity=Uncorrectable (Fatal)", event{}, false},
		{"x: PCIe Bus Error: severity=Uncorrected (Fatal), type=Inaccessible", event{}, false},
		{"x 0000:01:00.0 y: PCIe Bus Error: severity=Uncorrected (Fatal), type=Inaccessible", event{}, false},
		{"pcieport 0000:00:1c.5: AER: Corrected error received: id=00e5", event{}, false},
		{"oom-kill:constraint=CONSTRAINT_CPUSET,nodemask=(null)", event{Kind: oomKill, Constraint: Cgroup}, true},
		{"oom-kill:constraint=CONSTRAINT_MEMORY_POLICY,nodemask=(null)", event{Kind: oomKill, Constraint: Global}, true},
		{"oom-kill:", event{}, false},
		{"oom-kill:constraint=", event{}, false},
		{"Out of memory (oom_kill_allocating_task): Killed process 5 (x) total-vm:1kB", event{Kind: oomKill, Constraint: Global}, true},
		{"NVRM: GPU0 nvAssertOkFailedNoLog: Assertion failed: Out of memory [NV_ERR_NO_MEMORY] (0x00000051) returned from x @ y.c:1", event{Kind: driverOutOfMemory}, true},
		{"NVRM: nvCheckOkFailedNoLog: Check failed: Call not supported [NV_ERR_NOT_SUPPORTED] (0x00000056) returned from x", event{}, false},
		{"NVRM: Xid (0000:01:00): 79, GPU has fallen off the bus.", event{}, false},
		{"NVRM: Xid (PCI:0000:01:0): 79, x", event{}, false},
		{" NVRM: Xid (PCI:0000:01:00): 79, x", event{}, false},
		{"arm-smmu-v3 arm-smmu-v3.1.auto: CMD_SYNC timeout at 0x00017d73 [hwprod 0x00017d73, hwcons 0x00017d72]", event{Kind: smmuTimeout}, true},
		{"arm-smmu-v3 arm-smmu-v3.0.auto: CMD_SYNC timeout", event{Kind: smmuTimeout}, true},
		{"arm-smmu-v3 2b400000.iommu: CMD_SYNC timeout at 0x00000146 [hwprod 0x00000146, hwcons 0x00000000]", event{Kind: smmuTimeout}, true},
		{"arm-smmu-v3 arm-smmu-v3.1.auto: CMDQ error (cons 0x0100b1b7): ATC invalidate timeout", event{}, false},
		{"arm-smmu-v3 arm-smmu-v3.1.auto: CMD_SYNC timeouts", event{}, false},
		{"arm-smmu-v3 a:[4247]: segfault at 0 ip 0 sp 0 error 4 in x: CMD_SYNC timeout at 0x00017d73[5+1]", event{}, false},
		{"x arm-smmu-v3 arm-smmu-v3.1.auto: CMD_SYNC timeout", event{}, false},
	} {
		var c classifier
		got, ok := c.classify(tc.msg)
		if ok != tc.ok || got != tc.want {
			t.Errorf("Classify(%q) = %+v, %v; want %+v, %v", tc.msg, got, ok, tc.want, tc.ok)
		}
	}
}

// An OOM kill is counted once: by its constraint line where the kernel
// prints one, by its "Killed process" line where it does not (before 4.19).
func TestOOMKillCountedOnce(t *testing.T) {
	counts := NewCounts()
	var c classifier
	for _, msg := range []string{
		"python invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0",
		"oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,task=python,pid=1,uid=0",
		"Out of memory: Killed process 1 (python) total-vm:1kB",
		// A 4.x kernel: no constraint line.
		"Memory cgroup out of memory: Kill process 24572 (java) score 0 or sacrifice child",
		"Killed process 28438 (java) total-vm:20255636kB, anon-rss:466160kB, file-rss:13684kB",
		"Memory cgroup out of memory: Killed process 3 (uwsgi) total-vm:1kB",
	} {
		if ev, ok := c.classify(msg); ok {
			counts.add(ev)
		}
	}
	if counts.OOMKills[Global] != 1 || counts.OOMKills[Cgroup] != 1 {
		t.Errorf("OOM kills %v, want one global and one cgroup", counts.OOMKills)
	}
}

func fixture(t testing.TB, name string) string {
	return filepath.Join("..", "..", "testdata", "kmsg", name)
}

// The real lines of testdata/kmsg (README.md there names each source)
// give one event per kill, per Xid line, per PCIe Bus Error line.
func TestFixtures(t *testing.T) {
	for _, tc := range []struct {
		file  string
		check func(Counts) bool
	}{
		{"nvrm-no-memory.kmsg", func(c Counts) bool { return c.DriverOutOfMemory == 2 && len(c.Xid) == 0 }},
		{"xid.kmsg", func(c Counts) bool {
			return len(c.Xid) == 5 && c.Xid[13] == 2 && c.Xid[31] == 2 && c.Xid[32] == 1 && c.Xid[43] == 2 && c.Xid[79] == 1
		}},
		{"oom-global.kmsg", func(c Counts) bool { return c.OOMKills[Global] == 1 && c.OOMKills[Cgroup] == 0 }},
		{"oom-cgroup.kmsg", func(c Counts) bool { return c.OOMKills[Global] == 0 && c.OOMKills[Cgroup] == 1 }},
		{"aer.kmsg", func(c Counts) bool { return c.AER[Corrected] == 1 && c.AER[NonFatal] == 1 && c.AER[Fatal] == 1 }},
		{"smmu.kmsg", func(c Counts) bool { return c.SMMUTimeouts == 3 && c.DriverOutOfMemory == 0 && len(c.Xid) == 0 }},
	} {
		r, err := Open(fixture(t, tc.file))
		if err != nil {
			t.Fatal(err)
		}
		got := r.Counts()
		r.Close()
		if !tc.check(got) || got.Skipped[Malformed] != 0 || got.Skipped[NotKernel] != 0 {
			t.Errorf("%s: counts %+v", tc.file, got)
		}
	}
}

func TestOpenMissing(t *testing.T) {
	if _, err := Open(filepath.Join(t.TempDir(), "kmsg")); err == nil {
		t.Error("Open of a missing file gave no error")
	}
}

// A record seen twice (its sequence number not above the last) counts once,
// and a line that is not a record is counted as malformed, not fatal.
func TestReplayedAndMalformed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kmsg")
	line := "3,10,1,-;NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus.\n"
	if err := os.WriteFile(path, []byte(line+line+"garbage\n"+strings.Replace(line, ",10,", ",11,", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c := r.Counts()
	if c.Xid[79] != 2 || c.Skipped[Malformed] != 1 {
		t.Errorf("counts %+v, want Xid 79 twice and one malformed line", c)
	}
}

// A FIFO is followed: records written after the open are counted, a record
// cut across two writes included, and Close ends the reader.
func TestFollowFIFO(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kmsg")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	// Held open for writing (and reading, so that the open does not
	// wait for a reader) for the whole test.
	w, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	r.Start()
	if c := r.Counts(); c.AER[Fatal] != 0 {
		t.Fatalf("counts before any write: %+v", c)
	}
	w.WriteString("0,1,5,-;pcieport 0004:00:00.0: PCIe Bus Error: sever")
	w.WriteString("ity=Uncorrectable (Fatal), type=Transaction Layer\n 0,2,6,-;x\n")
	testexporter.Eventually(t, 10*time.Second, func() bool { return r.Counts().AER[Fatal] == 1 },
		"the fatal AER line written to the FIFO counted")
	if err := r.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

// A line longer than any record is dropped whole, and the next counted.
func TestLongLineDropped(t *testing.T) {
	var s lineSplitter
	var got []string
	long := strings.Repeat("x", maxRecord+10)
	dropped := 0
	line, tooLong := func(b []byte) { got = append(got, string(b)) }, func() { dropped++ }
	s.split([]byte(long[:maxRecord-5]), line, tooLong)
	s.split([]byte(long[maxRecord-5:]+"\nnext\n"), line, tooLong)
	s.split([]byte(long+"\n"+long[:maxRecord]+"\n"), line, tooLong)
	if len(got) != 2 || got[0] != "next" || got[1] != long[:maxRecord] || dropped != 2 {
		t.Errorf("lines %.20q, %d dropped; want \"next\", the line of MaxRecord bytes, and 2 dropped", got, dropped)
	}
}

// Whatever the bytes, reading them never panics, the counts stay bounded
// and every fixed key stays present.
func FuzzFeed(f *testing.F) {
	for _, name := range []string{"aer.kmsg", "xid.kmsg", "oom-global.kmsg", "oom-cgroup.kmsg", "nvrm-no-memory.kmsg", "smmu.kmsg"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "kmsg", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	forged, err := os.ReadFile(fixture(f, "forged.kmsg"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(forged)
	f.Add([]byte("6,1,2,-;NVRM: Xid (PCI:0): 9999,\n ;\n\n"))
	f.Add([]byte("12,1,2,-;NVRM: Xid (PCI:0000:01:00): 79, x\n4,2,3,-;NVRM: Xid (PCI:0000:01:00): 154, x\n"))
	f.Add([]byte("4,9,1,-;" + strings.Repeat("NVRM: ", 2000) + "\n4,1,2,-;oom-kill:constraint=CONSTRAINT_MEMCG,\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &Reader{counts: NewCounts()}
		for len(data) > 0 {
			n := min(len(data), 97)
			r.feed(data[:n])
			data = data[n:]
		}
		c := r.Counts()
		if c.quietXids() > maxXidCodes || len(c.OOMKills) != 2 || len(c.AER) != 3 || len(c.Skipped) != 3 || len(r.lines.partial) > maxRecord {
			t.Errorf("counts out of bounds: %+v", c)
		}
		for code := range c.Xid {
			if code <= 0 || code > maxXid {
				t.Errorf("Xid code %d counted", code)
			}
		}
	})
}

// The real device, where this test may read it: every record the running
// kernel holds parses, and the reader follows it until closed.
func TestRealDevice(t *testing.T) {
	r, err := Open("/dev/kmsg")
	if err != nil {
		t.Skipf("/dev/kmsg not readable here: %v", err)
	}
	r.Start()
	c := r.Counts()
	if err := r.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if c.Skipped[Malformed] != 0 {
		t.Errorf("%d records of this kernel's log did not parse", c.Skipped[Malformed])
	}
}

// The reader's cost per record: a line cut, parsed and classified.
func BenchmarkFeed(b *testing.B) {
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "kmsg", "spark.kmsg"))
	if err != nil {
		b.Fatal(err)
	}
	lines := strings.Count(string(data), "\n")
	r := &Reader{counts: NewCounts()}
	b.ReportAllocs()
	for b.Loop() {
		r.seen = false
		r.feed(data)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*lines), "ns/line")
}
