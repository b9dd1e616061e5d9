package kmsg

import (
	"bytes"
	"fmt"
	"os"
	"reflect"
	"testing"

	"github.com/spark-exporter/spark_exporter/internal/judge"
)

// The names of the attack, as the kernel logs them at its own
// facility: a process's name (at most 15 bytes) at the very start of the
// message, or a file name within it. None is an event.
func TestForgedNamesAreNoEvent(t *testing.T) {
	data, err := os.ReadFile(fixture(t, "forged.kmsg"))
	if err != nil {
		t.Fatal(err)
	}
	msgs := []string{"oom-kill:", "NVRM: Xid ): 8,", "NVRM: Xid (PCI:", "Out of memory: "}
	for _, line := range bytes.Split(bytes.TrimSpace(data), []byte{'\n'}) {
		rec, err := parse(line)
		if err != nil {
			t.Fatal(err)
		}
		if rec.Facility == 0 {
			msgs = append(msgs, rec.Message)
		}
	}
	for _, msg := range msgs {
		var c classifier
		if ev, ok := c.classify(msg); ok {
			t.Errorf("Classify(%q) = %+v, want no event", msg, ev)
		}
	}
}

// Forged names and records another facility wrote (a user's, a daemon's
// write to /dev/kmsg) change no count, however they follow real records.
func TestForgedRecordsCountNothing(t *testing.T) {
	want := counted(t, "spark.kmsg")
	got := counted(t, "spark.kmsg", "forged.kmsg")
	if got.Skipped[NotKernel] != 7 || got.Skipped[Malformed] != 0 {
		t.Errorf("skipped %v, want the 7 records of other facilities", got.Skipped)
	}
	got.Skipped, want.Skipped = nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("with forged.kmsg: %+v\nwithout: %+v", got, want)
	}
}

// counted is what a reader counts of the fixtures, one after the other.
func counted(t *testing.T, names ...string) Counts {
	t.Helper()
	r := &Reader{counts: NewCounts()}
	for _, name := range names {
		data, err := os.ReadFile(fixture(t, name))
		if err != nil {
			t.Fatal(err)
		}
		r.feed(data)
	}
	return r.Counts()
}

// 64 codes that do not page fill the cap; a code that pages is counted
// all the same.
func TestXidCapKeepsPagingCodes(t *testing.T) {
	c := NewCounts()
	for code := 1; len(c.Xid) < maxXidCodes; code++ {
		if !judge.XidPages(code) {
			c.add(event{Kind: xid, Code: code})
		}
	}
	c.add(event{Kind: xid, Code: 79})
	c.add(event{Kind: xid, Code: 999})
	if c.Xid[79] != 1 || c.Xid[999] != 0 || c.LeftOut != 1 {
		t.Errorf("Xid 79 %d, 999 %d, left out %d; want 1, 0, 1", c.Xid[79], c.Xid[999], c.LeftOut)
	}
}

// 64 Xid codes written at the user facility, then the kernel's Xid 79.
func TestUserXidsDoNotCrowdOutTheKernels(t *testing.T) {
	r := &Reader{counts: NewCounts()}
	for code := 1; code <= maxXidCodes; code++ {
		r.feed(fmt.Appendf(nil, "12,%d,1,-;NVRM: Xid (PCI:0000:01:00): %d, forged\n", code, code))
	}
	r.feed([]byte("4,100,2,-;NVRM: Xid (PCI:000f:01:00): 79, GPU has fallen off the bus.\n"))
	if c := r.Counts(); len(c.Xid) != 1 || c.Xid[79] != 1 || c.Skipped[NotKernel] != maxXidCodes {
		t.Errorf("Xid counts %v, skipped %v; want only 79 once, the user's 64 skipped", c.Xid, c.Skipped)
	}
}
