package workload

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"
)

// The kernel's sock_diag netlink interface (linux/inet_diag.h) tells what
// /proc/net/tcp{,6} tell of the listening sockets at a fraction of the
// cost: each read of those files walks every bucket of the established
// hash, sized by the machine's memory (262,144 on a 24 GiB host, about
// 1 ms a file), where a dump that asks for LISTEN alone walks the
// listening hash only (inet_diag_dump_icsk). No kept library asks for
// LISTEN alone: vishvananda/netlink's dumps ask for every state.

const (
	nlmsgHeaderLen   = 16 // struct nlmsghdr
	inetDiagReqLen   = 56 // struct inet_diag_req_v2
	inetDiagMsgLen   = 72 // struct inet_diag_msg
	tcpListen        = 10 // TCP_LISTEN, linux/tcp_states.h
	diagReplyTimeout = time.Second
)

// diagListeners asks the kernel for the TCP listeners of this process's
// network namespace, IPv4 then IPv6, and returns those loopback reaches
// that keep accepts.
func diagListeners(keep func(Listener) bool) ([]Listener, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return nil, fmt.Errorf("sock_diag: %w", err)
	}
	defer unix.Close(fd)
	// The kernel answers a dump at once; the bound is for a kernel that
	// does not answer at all.
	tv := unix.NsecToTimeval(diagReplyTimeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return nil, fmt.Errorf("sock_diag: %w", err)
	}
	var out []Listener
	// The kernel fills a dump's datagrams to at most 32 KiB
	// (netlink_recvmsg's max_recvmsg_len); a larger one is MSG_TRUNC.
	buf := make([]byte, 32<<10)
	for _, family := range []uint8{unix.AF_INET, unix.AF_INET6} {
		if out, err = diagDump(fd, buf, family, keep, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// diagDump asks the netlink socket fd for the listeners of family, and
// reads its reply into buf to its end.
func diagDump(fd int, buf []byte, family uint8, keep func(Listener) bool, out []Listener) ([]Listener, error) {
	if err := unix.Sendto(fd, diagRequest(family), 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, fmt.Errorf("sock_diag: %w", err)
	}
	for {
		n, _, flags, from, err := unix.Recvmsg(fd, buf, nil, 0)
		if err != nil {
			return nil, fmt.Errorf("sock_diag: %w", err)
		}
		if nl, ok := from.(*unix.SockaddrNetlink); !ok || nl.Pid != 0 {
			continue // not the kernel's: only it answers a dump
		}
		if flags&unix.MSG_TRUNC != 0 {
			return nil, errors.New("sock_diag: a reply larger than its buffer")
		}
		var done bool
		if out, done, err = parseDiagReply(buf[:n], family, keep, out); err != nil || done {
			return out, err
		}
	}
}

// diagRequest is a dump request for the TCP sockets of family in LISTEN.
func diagRequest(family uint8) []byte {
	b := make([]byte, nlmsgHeaderLen+inetDiagReqLen)
	ne := binary.NativeEndian
	ne.PutUint32(b[0:], uint32(len(b)))
	ne.PutUint16(b[4:], unix.SOCK_DIAG_BY_FAMILY)
	ne.PutUint16(b[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	b[nlmsgHeaderLen] = family
	b[nlmsgHeaderLen+1] = unix.IPPROTO_TCP
	ne.PutUint32(b[nlmsgHeaderLen+4:], 1<<tcpListen)
	return b
}

// parseDiagReply reads one datagram of a dump's reply: netlink messages,
// each an inet_diag_msg, until NLMSG_DONE (done) or NLMSG_ERROR.
func parseDiagReply(b []byte, family uint8, keep func(Listener) bool, out []Listener) ([]Listener, bool, error) {
	ne := binary.NativeEndian
	for len(b) >= nlmsgHeaderLen {
		size := int(ne.Uint32(b))
		if size < nlmsgHeaderLen || size > len(b) {
			return out, false, errors.New("sock_diag: a message beyond its datagram")
		}
		body := b[nlmsgHeaderLen:size]
		switch ne.Uint16(b[4:]) {
		case unix.NLMSG_DONE:
			return out, true, nil
		case unix.NLMSG_ERROR:
			if len(body) >= 4 {
				if errno := -int32(ne.Uint32(body)); errno > 0 {
					return out, false, fmt.Errorf("sock_diag: %w", unix.Errno(errno))
				}
			}
			return out, false, errors.New("sock_diag: an error without its number")
		case unix.SOCK_DIAG_BY_FAMILY:
			if l, ok := parseDiagMsg(body, family); ok && keep(l) {
				out = append(out, l)
			}
		}
		// Messages are aligned to 4 bytes (NLMSG_ALIGN).
		next := (size + 3) &^ 3
		if next > len(b) {
			break
		}
		b = b[next:]
	}
	return out, false, nil
}

// parseDiagMsg reads an inet_diag_msg: a listener of family in LISTEN,
// with an address loopback reaches, or not ok.
func parseDiagMsg(m []byte, family uint8) (Listener, bool) {
	if len(m) < inetDiagMsgLen || m[0] != family || m[1] != tcpListen {
		return Listener{}, false
	}
	port := binary.BigEndian.Uint16(m[4:]) // idiag_sport, network order
	var addr netip.Addr
	if family == unix.AF_INET {
		addr = netip.AddrFrom4([4]byte(m[8:12]))
	} else {
		addr = netip.AddrFrom16([16]byte(m[8:24]))
	}
	ne := binary.NativeEndian
	l := Listener{UID: int(ne.Uint32(m[64:])), Inode: uint64(ne.Uint32(m[68:])), Addr: reachedOnLoopback(addr, port)}
	return l, l.Addr.IsValid()
}
