package workload

import (
	"bufio"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/spark-exporter/spark_exporter/internal/hostfs"
)

// Which listener a process holds, as the kernel shows it: a descriptor in
// /proc/PID/fd that links to socket:[INODE], and that inode's LISTEN entry
// in /proc/net/tcp or tcp6. procfs's readers of both are not used: they
// read every descriptor and every socket of the host at each call, where
// a process may hold a million descriptors and a user may open as many
// connections.

// Listener is a TCP socket in LISTEN state that loopback reaches.
type Listener struct {
	Inode uint64
	// UID is the socket's owner: the user whose process opened it.
	UID int
	// Addr is where to ask it on loopback: 127.0.0.1 or ::1 for a
	// wildcard, else the loopback address it is bound to.
	Addr netip.AddrPort
}

// MaxDescriptors bounds the descriptors read of one process: a server
// opens its listener early, and the kernel lists descriptors by number.
const MaxDescriptors = 4096

// ErrNotPermitted: the process's descriptors are not the reader's to see
// (another user's process, without CAP_SYS_PTRACE).
var ErrNotPermitted = errors.New("the process's descriptors are not readable")

// SocketInodes reads the inodes of the sockets among the process's first
// MaxDescriptors descriptors.
func SocketInodes(proc hostfs.FS, pid int) (map[uint64]bool, error) {
	dir := proc.Path(strconv.Itoa(pid) + "/fd")
	f, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		return nil, permission(err)
	}
	defer f.Close()
	names, err := f.Readdirnames(MaxDescriptors)
	if err != nil && err != io.EOF {
		return nil, permission(err)
	}
	inodes := map[uint64]bool{}
	for _, name := range names {
		link, err := os.Readlink(dir + "/" + name)
		if err != nil {
			if permission(err) == ErrNotPermitted {
				return nil, ErrNotPermitted
			}
			continue
		}
		if s, ok := strings.CutPrefix(link, "socket:["); ok && strings.HasSuffix(s, "]") {
			if inode, err := strconv.ParseUint(s[:len(s)-1], 10, 64); err == nil {
				inodes[inode] = true
			}
		}
	}
	return inodes, nil
}

func permission(err error) error {
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EPERM) {
		return ErrNotPermitted
	}
	return err
}

// ReadListeners reads the listening sockets of /proc/net/tcp and tcp6 that
// keep accepts. The kernel lists the listening sockets of each file
// before any other (tcp_seq_start), so a file is read only that far.
//
// With diag, where proc is a procfs (hostfs.FS.IsProcfs, told once by the
// caller) whose net/ is this process's network namespace, the kernel's
// sock_diag is asked instead (sockdiag.go), and the files read only if it
// fails (a kernel without inet_diag): keep may then have been called for
// some listeners already, and is called again for them.
func ReadListeners(proc hostfs.FS, diag bool, keep func(Listener) bool) ([]Listener, error) {
	if diag {
		if out, err := diagListeners(keep); err == nil {
			return out, nil
		}
	}
	var out []Listener
	for _, name := range []string{"net/tcp", "net/tcp6"} {
		var err error
		if out, err = readListeners(proc.Path(name), keep, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func readListeners(path string, keep func(Listener) bool, out []Listener) ([]Listener, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return out, nil // no IPv6, or a fixture without sockets
		}
		return nil, err
	}
	defer f.Close()
	if info, err := f.Stat(); err != nil || !info.Mode().IsRegular() {
		return nil, errors.New("not a file of sockets")
	}
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		l, listening := parseListenLine(sc.Text())
		if !listening {
			break
		}
		if l.Addr.IsValid() && keep(l) {
			out = append(out, l)
		}
	}
	return out, sc.Err()
}

// parseListenLine reads one line of /proc/net/tcp{,6}: "sl local remote st
// … uid timeout inode …". listening is false past the LISTEN entries (state
// 0A); Addr is invalid where loopback does not reach the socket.
func parseListenLine(line string) (l Listener, listening bool) {
	f := strings.Fields(line)
	if len(f) < 10 || f[3] != "0A" {
		return Listener{}, false
	}
	hexAddr, hexPort, ok := strings.Cut(f[1], ":")
	port, err := strconv.ParseUint(hexPort, 16, 16)
	uid, uerr := strconv.Atoi(f[7])
	inode, ierr := strconv.ParseUint(f[9], 10, 64)
	if !ok || err != nil || uerr != nil || ierr != nil || port == 0 {
		return Listener{}, true
	}
	return Listener{Inode: inode, UID: uid, Addr: onLoopback(hexAddr, uint16(port))}, true
}

// onLoopback is where loopback reaches a socket bound to the kernel's hex
// address (32-bit words in host order, little-endian on arm64 and x86).
func onLoopback(hexAddr string, port uint16) netip.AddrPort {
	b, err := hex.DecodeString(hexAddr)
	if err != nil || (len(b) != 4 && len(b) != 16) {
		return netip.AddrPort{}
	}
	for i := 0; i < len(b); i += 4 {
		b[i], b[i+1], b[i+2], b[i+3] = b[i+3], b[i+2], b[i+1], b[i]
	}
	addr, _ := netip.AddrFromSlice(b)
	return reachedOnLoopback(addr, port)
}

// reachedOnLoopback is where loopback reaches a socket bound to addr: a
// loopback address, or the wildcard's loopback; invalid for another.
func reachedOnLoopback(addr netip.Addr, port uint16) netip.AddrPort {
	if port == 0 {
		return netip.AddrPort{}
	}
	switch u := addr.Unmap(); {
	case u.IsLoopback():
		addr = u
	case u == netip.IPv4Unspecified():
		addr = netip.AddrFrom4([4]byte{127, 0, 0, 1})
	case addr == netip.IPv6Unspecified():
		addr = netip.IPv6Loopback()
	default:
		return netip.AddrPort{}
	}
	return netip.AddrPortFrom(addr, port)
}

// ProcessUID is the fs uid of /proc/PID/status's Uid line: the owner of
// the sockets the process opens.
func ProcessUID(status []byte) (int, bool) {
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			f := strings.Fields(rest)
			if len(f) != 4 {
				return 0, false
			}
			uid, err := strconv.Atoi(f[3])
			return uid, err == nil && uid >= 0
		}
	}
	return 0, false
}
