// Package container tells which container a process runs in from its
// /proc/PID/cgroup, and never keeps the path parsed.
package container

import (
	"bytes"
	"strings"
)

// Ref is the container a process runs in; the zero Ref is the host.
type Ref struct {
	ID     string // short, as `docker ps` shows it
	PodUID string // with dashes
}

// ShortIDLength is the short form every runtime's CLI prints and accepts.
const ShortIDLength = 12

// maxLine: a cgroup path is at most PATH_MAX.
const maxLine = 4096

// ParseCgroup prefers cgroup v2's line ("0::/path"); on v1 the first line
// that names a container wins, as every controller holds the same path.
// testdata/cgroup/README.md gives each runtime's path form and its source.
func ParseCgroup(data []byte) Ref {
	var v1 Ref
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		if len(line) > maxLine {
			continue
		}
		hierarchy, rest, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		_, path, ok := bytes.Cut(rest, []byte(":"))
		if !ok {
			continue
		}
		ref := parsePath(string(path))
		if string(hierarchy) == "0" && len(rest) > 0 && rest[0] == ':' {
			if ref != (Ref{}) {
				return ref
			}
			continue
		}
		if v1 == (Ref{}) {
			v1 = ref
		}
	}
	return v1
}

// parsePath: the deepest container wins, as a container's own cgroup lies
// under its pod's.
func parsePath(path string) Ref {
	var ref Ref
	for comp := range strings.SplitSeq(path, "/") {
		if uid, ok := podUID(comp); ok {
			ref.PodUID = uid
			continue
		}
		if id, ok := containerID(comp); ok {
			ref.ID = id
		}
	}
	if ref.ID == "" {
		return Ref{PodUID: ref.PodUID}
	}
	return ref
}

var runtimePrefixes = []string{"docker-", "cri-containerd-", "crio-", "libpod-", "containerd-"}

func containerID(comp string) (string, bool) {
	name := strings.TrimSuffix(comp, ".scope")
	for _, p := range runtimePrefixes {
		if rest, ok := strings.CutPrefix(name, p); ok {
			name = rest
			break
		}
	}
	// conmon's libpod-conmon-<id>.scope is the container's monitor, and fails this.
	if len(name) != 64 || !isHex(name) {
		return "", false
	}
	return name[:ShortIDLength], true
}

// podUID: systemd reserves dashes, so its slices spell the UID with underscores.
func podUID(comp string) (string, bool) {
	name := strings.TrimSuffix(comp, ".slice")
	i := strings.LastIndex(name, "pod")
	if i < 0 {
		return "", false
	}
	if i > 0 && name[i-1] != '-' {
		return "", false
	}
	if i > 0 && !strings.HasPrefix(name, "kubepods") {
		return "", false
	}
	uid := strings.ReplaceAll(name[i+len("pod"):], "_", "-")
	if !isUUID(uid) {
		return "", false
	}
	return uid, true
}

func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch i {
		case 8, 13, 18, 23:
			if s[i] != '-' {
				return false
			}
		default:
			if !isHexByte(s[i]) {
				return false
			}
		}
	}
	return true
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isHexByte(s[i]) {
			return false
		}
	}
	return true
}

// isHexByte: every runtime writes lowercase, and a label should not depend on case.
func isHexByte(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' }
