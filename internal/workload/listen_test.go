package workload

import (
	"testing"
)

// Lines of /proc/net/tcp and tcp6 as the kernel writes them (arm64 and
// x86: each 32-bit word little-endian).
func TestParseListenLine(t *testing.T) {
	const rest = " 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0000000000000000 100 0 0 10 0"
	for _, tc := range []struct {
		line, addr string
		listening  bool
	}{
		{"   0: 0100007F:1F40 00000000:0000 0A" + rest, "127.0.0.1:8000", true},
		{"   1: 00000000:2BCB 00000000:0000 0A" + rest, "127.0.0.1:11211", true},
		{"   2: 0102A8C0:1F40 00000000:0000 0A" + rest, "invalid AddrPort", true}, // 192.168.2.1: not loopback
		{"   0: 00000000000000000000000000000000:1F90 00000000000000000000000000000000:0000 0A" + rest, "[::1]:8080", true},
		{"   1: 00000000000000000000000001000000:1F90 00000000000000000000000000000000:0000 0A" + rest, "[::1]:8080", true},
		{"   2: 0000000000000000FFFF00000100007F:1F90 00000000000000000000000000000000:0000 0A" + rest, "127.0.0.1:8080", true},
		{"   3: 0100007F:1F40 0100007F:C350 01" + rest, "invalid AddrPort", false}, // established: past the listeners
		{"   4: 0100007F:zz 00000000:0000 0A" + rest, "invalid AddrPort", true},
	} {
		l, listening := parseListenLine(tc.line)
		if l.Addr.String() != tc.addr || listening != tc.listening {
			t.Errorf("%q: %s listening %v, want %s %v", tc.line, l.Addr, listening, tc.addr, tc.listening)
		}
		if l.Addr.IsValid() && (l.UID != 1000 || l.Inode != 4242) {
			t.Errorf("%q: uid %d inode %d", tc.line, l.UID, l.Inode)
		}
	}
}

func TestProcessUID(t *testing.T) {
	for status, want := range map[string]int{
		"Name:\tvllm\nUid:\t1000\t1000\t1000\t1001\nGid:\t1000\n": 1001,
		"Name:\tvllm\nUid:\t1000\t1000\n":                         -1,
		"Name:\tvllm\n":                                           -1,
	} {
		uid, ok := ProcessUID([]byte(status))
		if !ok {
			uid = -1
		}
		if uid != want {
			t.Errorf("%q: uid %d, want %d", status, uid, want)
		}
	}
}
