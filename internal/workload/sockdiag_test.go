package workload

import (
	"encoding/binary"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/spark-exporter/spark_exporter/internal/hostfs"
)

// inodeOf is the socket inode of l, as /proc/self/fd links to it.
func inodeOf(t *testing.T, l net.Listener) uint64 {
	t.Helper()
	f, err := l.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// The kernel's sock_diag and /proc/net/tcp{,6} tell the same of this
// process's listeners: loopback, the wildcard (asked at loopback), IPv6;
// neither tells a listener on another address, nor a connection.
func TestDiagListenersAreProcNetTCPs(t *testing.T) {
	want := map[uint64]string{}
	listen := func(network, address, reached string) net.Listener {
		t.Helper()
		l, err := net.Listen(network, address)
		if err != nil {
			if network == "tcp6" {
				t.Log("no IPv6 here:", err)
				return nil
			}
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		if reached != "" {
			_, port, _ := net.SplitHostPort(l.Addr().String())
			want[inodeOf(t, l)] = net.JoinHostPort(reached, port)
		}
		return l
	}
	loopback := listen("tcp4", "127.0.0.1:0", "127.0.0.1")
	listen("tcp4", "0.0.0.0:0", "127.0.0.1")
	listen("tcp6", "[::1]:0", "::1")
	// Another address of this host than loopback, where it has one.
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if ip, ok := a.(*net.IPNet); ok && ip.IP.To4() != nil && !ip.IP.IsLoopback() {
				listen("tcp4", net.JoinHostPort(ip.IP.String(), "0"), "")
				break
			}
		}
	}
	conn, err := net.Dial("tcp", loopback.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	accepted, err := loopback.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer accepted.Close()

	ours := func(l Listener) bool { return l.UID == os.Getuid() }
	diag, err := diagListeners(ours)
	if err != nil {
		t.Fatal(err)
	}
	var files []Listener
	for _, name := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		if files, err = readListeners(name, ours, files); err != nil {
			t.Fatal(err)
		}
	}
	for name, got := range map[string][]Listener{"sock_diag": diag, "/proc/net/tcp": files} {
		seen := map[uint64]string{}
		for _, l := range got {
			seen[l.Inode] = l.Addr.String()
		}
		for inode, addr := range want {
			if seen[inode] != addr {
				t.Errorf("%s: socket %d at %q, want %s", name, inode, seen[inode], addr)
			}
		}
		for _, l := range got {
			if want[l.Inode] == "" && listenedHere(l.Inode) {
				t.Errorf("%s: %s is this process's and not a loopback listener", name, l.Addr)
			}
		}
	}
	if !hostfs.New("/proc").IsProcfs() || hostfs.New(t.TempDir()).IsProcfs() {
		t.Error("/proc is not told for a procfs, or a directory is")
	}
}

// listenedHere tells whether this process holds the socket.
func listenedHere(inode uint64) bool {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return false
	}
	for _, e := range entries {
		if link, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && link == "socket:["+strconv.FormatUint(inode, 10)+"]" {
			return true
		}
	}
	return false
}

// diagMessage is one netlink message of a dump's reply: an inet_diag_msg
// of a socket in state at addr, or a bare header of type typ.
func diagMessage(typ uint16, state uint8, addr netip.AddrPort, uid, inode uint32) []byte {
	ne := binary.NativeEndian
	var body []byte
	switch typ {
	case unix.SOCK_DIAG_BY_FAMILY:
		body = make([]byte, inetDiagMsgLen)
		body[0], body[1] = unix.AF_INET, state
		if addr.Addr().Is6() {
			body[0] = unix.AF_INET6
		}
		binary.BigEndian.PutUint16(body[4:], addr.Port())
		a := addr.Addr().AsSlice()
		copy(body[8:], a)
		ne.PutUint32(body[64:], uid)
		ne.PutUint32(body[68:], inode)
	case unix.NLMSG_ERROR:
		body = make([]byte, 4)
		errno := -int32(unix.EPERM)
		ne.PutUint32(body, uint32(errno))
	}
	b := make([]byte, nlmsgHeaderLen, nlmsgHeaderLen+len(body))
	ne.PutUint32(b, uint32(nlmsgHeaderLen+len(body)))
	ne.PutUint16(b[4:], typ)
	return append(b, body...)
}

// A reply is read message by message to its end; what is not a loopback
// listener is left out, and a message that overruns its datagram or an
// error ends it with an error.
func TestParseDiagReply(t *testing.T) {
	all := func(Listener) bool { return true }
	listener := func(addr string, inode uint32) []byte {
		return diagMessage(unix.SOCK_DIAG_BY_FAMILY, tcpListen, netip.MustParseAddrPort(addr), 1000, inode)
	}
	reply := append(listener("127.0.0.1:8000", 1), listener("0.0.0.0:11434", 2)...)
	reply = append(reply, listener("192.168.2.1:8000", 3)...)
	reply = append(reply, diagMessage(unix.SOCK_DIAG_BY_FAMILY, 1, netip.MustParseAddrPort("127.0.0.1:8001"), 1000, 4)...)
	got, done, err := parseDiagReply(reply, unix.AF_INET, all, nil)
	if err != nil || done || len(got) != 2 || got[0].Addr.String() != "127.0.0.1:8000" || got[1].Addr.String() != "127.0.0.1:11434" ||
		got[0].UID != 1000 || got[0].Inode != 1 || got[1].Inode != 2 {
		t.Errorf("a datagram of four sockets: %+v done %v %v, want the two loopback listeners", got, done, err)
	}
	got, done, err = parseDiagReply(append(listener("[::]:8080", 5), diagMessage(unix.NLMSG_DONE, 0, netip.AddrPort{}, 0, 0)...), unix.AF_INET6, all, nil)
	if err != nil || !done || len(got) != 1 || got[0].Addr.String() != "[::1]:8080" {
		t.Errorf("the last datagram: %+v done %v %v", got, done, err)
	}
	if _, _, err := parseDiagReply(diagMessage(unix.NLMSG_ERROR, 0, netip.AddrPort{}, 0, 0), unix.AF_INET, all, nil); err == nil || !strings.Contains(err.Error(), "not permitted") {
		t.Errorf("an error message: %v", err)
	}
	if _, _, err := parseDiagReply(listener("127.0.0.1:8000", 1)[:40], unix.AF_INET, all, nil); err == nil {
		t.Error("a message cut short is taken")
	}
}

func FuzzParseDiagReply(f *testing.F) {
	f.Add(diagMessage(unix.SOCK_DIAG_BY_FAMILY, tcpListen, netip.MustParseAddrPort("127.0.0.1:8000"), 1000, 1), uint8(unix.AF_INET))
	f.Add(diagMessage(unix.NLMSG_DONE, 0, netip.AddrPort{}, 0, 0), uint8(unix.AF_INET6))
	f.Fuzz(func(t *testing.T, reply []byte, family uint8) {
		got, _, _ := parseDiagReply(reply, family, func(Listener) bool { return true }, nil)
		for _, l := range got {
			if !l.Addr.IsValid() || !l.Addr.Addr().IsLoopback() || l.Addr.Port() == 0 {
				t.Errorf("%+v: not a loopback listener", l)
			}
		}
	})
}
