package flight

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Other users may write elsewhere on the ring's path (/tmp) or plant files
// and links in it. So the writer opens the file in a directory descriptor
// it checked (openDir), never by a path checked before, and opens only a
// regular file of its own: stat first, as opening a device can act
// (/dev/watchdog arms), then O_NOFOLLOW|O_NONBLOCK and a second look.
var (
	errLinkInPath = errors.New("flight: the file has a symbolic link in its path that another user owns, not followed")
	errOpenDir    = errors.New("flight: the file has a directory on its path others may write, or another user owns")
	errNotOwn     = errors.New("flight: the file is owned by another user")
	errLinked     = errors.New("flight: the file has other names (hard links)")
	errSwapped    = errors.New("flight: the file was replaced while it was opened")
)

func openRing(file string) (f *os.File, created bool, err error) {
	abs, err := filepath.Abs(file)
	if err != nil {
		return nil, false, err
	}
	dir, err := openDir(filepath.Dir(abs))
	if err != nil {
		return nil, false, err
	}
	defer unix.Close(dir)
	name := filepath.Base(abs)
	var before unix.Stat_t
	err = unix.Fstatat(dir, name, &before, unix.AT_SYMLINK_NOFOLLOW)
	if errors.Is(err, unix.ENOENT) {
		fd, err := unix.Openat(dir, name, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o640)
		if err != nil {
			return nil, false, fmt.Errorf("flight: create: %w", err)
		}
		return os.NewFile(uintptr(fd), "flight"), true, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("flight: stat: %w", err)
	}
	if err := own(&before); err != nil {
		return nil, false, err
	}
	fd, err := unix.Openat(dir, name, unix.O_RDWR|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, false, fmt.Errorf("flight: open: %w", err)
	}
	f = os.NewFile(uintptr(fd), "flight")
	if _, err := sameFile(fd, &before); err != nil {
		f.Close()
		return nil, false, err
	}
	return f, false, nil
}

// openDir opens dir (absolute), walking from / one name at a time, each
// directory owned by root or the exporter's user and writable by no one
// else unless sticky (in /tmp others cannot rename what is not theirs). A
// link on the way is followed only if root or the exporter's user owns it
// (systemd's DynamicUser= makes /var/lib/NAME a link to private/NAME).
func openDir(dir string) (int, error) {
	fd, err := openRoot()
	if err != nil {
		return -1, err
	}
	names := strings.Split(dir, "/")
	for links := 0; len(names) > 0; {
		name := names[0]
		names = names[1:]
		if name == "" || name == "." {
			continue
		}
		next, err := unix.Openat(fd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if errors.Is(err, unix.ENOTDIR) {
			var target string
			if links++; links > 40 {
				err = fmt.Errorf("flight: a directory on the path: %w", unix.ELOOP)
			} else {
				target, err = trustedLink(fd, name)
			}
			if err == nil && path.IsAbs(target) {
				unix.Close(fd)
				fd, err = openRoot()
			}
			if err != nil {
				unix.Close(fd)
				return -1, err
			}
			names = append(strings.Split(target, "/"), names...)
			continue
		}
		unix.Close(fd)
		if err != nil {
			return -1, fmt.Errorf("flight: open a directory on the path: %w", err)
		}
		if err := trustedDir(next); err != nil {
			unix.Close(next)
			return -1, err
		}
		fd = next
	}
	return fd, nil
}

func openRoot() (int, error) {
	fd, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("flight: open /: %w", err)
	}
	if err := trustedDir(fd); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// trustedLink is ENOTDIR if name is no link.
func trustedLink(dir int, name string) (string, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return "", fmt.Errorf("flight: stat a directory on the path: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFLNK {
		return "", fmt.Errorf("flight: a name on the path: %w", unix.ENOTDIR)
	}
	if st.Uid != 0 && int(st.Uid) != os.Geteuid() {
		return "", errLinkInPath
	}
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(dir, name, buf)
	if err != nil {
		return "", fmt.Errorf("flight: read a link on the path: %w", err)
	}
	return string(buf[:n]), nil
}

func trustedDir(fd int) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("flight: stat a directory: %w", err)
	}
	if (st.Uid != 0 && int(st.Uid) != os.Geteuid()) || (st.Mode&0o022 != 0 && st.Mode&unix.S_ISVTX == 0) {
		return errOpenDir
	}
	return nil
}

// own refuses a file the exporter must not write: not a regular file, or
// another user's, or with other names (a hard link to a file elsewhere).
func own(st *unix.Stat_t) error {
	if err := regular(st); err != nil {
		return err
	}
	if int(st.Uid) != os.Geteuid() {
		return errNotOwn
	}
	if st.Nlink != 1 {
		return errLinked
	}
	return nil
}

var fileTypes = map[uint32]string{unix.S_IFDIR: "a directory", unix.S_IFCHR: "a character device",
	unix.S_IFBLK: "a block device", unix.S_IFIFO: "a named pipe", unix.S_IFSOCK: "a socket"}

func regular(st *unix.Stat_t) error {
	switch t := st.Mode & unix.S_IFMT; t {
	case unix.S_IFREG:
		return nil
	case unix.S_IFLNK:
		return errors.New("flight: the file is a symbolic link, not followed")
	default:
		return fmt.Errorf("flight: the file is %s, not a regular file", cmp.Or(fileTypes[t], "not a file"))
	}
}

// sameFile checks that fd is the file stat'ed before it was opened.
func sameFile(fd int, before *unix.Stat_t) (int64, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, fmt.Errorf("flight: stat: %w", err)
	}
	if st.Dev != before.Dev || st.Ino != before.Ino {
		return 0, errSwapped
	}
	return st.Size, regular(&st)
}

// openRead follows links: reading changes nothing.
func openRead(file string) (*os.File, int64, error) {
	var before unix.Stat_t
	if err := unix.Stat(file, &before); err != nil {
		return nil, 0, fmt.Errorf("flight: stat: %w", err)
	}
	if err := regular(&before); err != nil {
		return nil, 0, err
	}
	fd, err := unix.Open(file, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, 0, fmt.Errorf("flight: open: %w", err)
	}
	f := os.NewFile(uintptr(fd), "flight")
	size, err := sameFile(fd, &before)
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, size, nil
}
