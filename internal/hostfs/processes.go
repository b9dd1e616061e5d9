package hostfs

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"strconv"
	"syscall"
)

// Process is a process listed in /proc.
type Process struct {
	PID int
	// Ino is the inode number of the process's directory, 0 when not
	// known. procfs makes a new inode for every process, so an unchanged
	// inode tells that a pid still names the same process without reading
	// its stat.
	Ino uint64
}

// Processes reads the per-process files of a /proc tree: the listing with
// getdents, for each directory's inode (os.ReadDir would need a stat per
// process), then each file opened relative to the tree's directory.
// Errors are *fs.PathError naming the file relative to the mount point
// ("1234/stat"). A Processes is for one goroutine at a time.
type Processes struct {
	fs FS
	fd int // the tree's directory, open from one List to the next; -1 before
	// arena holds what the last ReadAll read.
	arena []byte
}

// File is what ReadAll read of one process's file, or why not.
type File struct {
	Data []byte
	Err  error
}

// Processes returns a reader of the process directories under the mount
// point. Close it to release the tree's directory.
func (f FS) Processes() *Processes { return &Processes{fs: f, fd: -1} }

// List appends every process found to ps; the reads that follow, within
// ctx, are of this listing's tree.
func (d *Processes) List(ctx context.Context, ps []Process) ([]Process, error) {
	d.Close()
	fd := -1
	var err error
	if blocked := d.fs.WithContext(ctx).Batch(func(r *Reader) error {
		if err = r.begin(".", "."); err != nil {
			return nil
		}
		defer r.end()
		if fd, err = retry(func() (int, error) {
			return syscall.Open(d.fs.root, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
		}); err != nil {
			return nil
		}
		buf := make([]byte, 16<<10)
		for {
			n, readErr := retry(func() (int, error) { return syscall.ReadDirent(fd, buf) })
			if readErr != nil || n <= 0 {
				err = readErr
				return nil
			}
			ps = appendPids(ps, buf[:n])
		}
	}); blocked != nil {
		return nil, blocked
	}
	if err != nil {
		if fd >= 0 {
			syscall.Close(fd)
		}
		return ps, err
	}
	d.fd = fd
	return ps, nil
}

// Read reads the file name of process pid into buf[:0], grown as needed.
// A read that blocks past ctx's deadline fails with a *BlockedError naming
// the file, and returns nil: the buffer is still being written to.
func (d *Processes) Read(ctx context.Context, pid int, name string, buf []byte) ([]byte, error) {
	var (
		data []byte
		err  error
	)
	// The batch may outlive the call, and the next List closes d.fd.
	dir := d.fd
	if blocked := d.fs.WithContext(ctx).Batch(func(r *Reader) error {
		data, err = d.read(r, dir, strconv.Itoa(pid)+"/"+name, buf)
		return nil
	}); blocked != nil {
		return nil, blocked
	}
	return data, err
}

// ReadAll reads the file name of each of ps in one batch, within ctx:
// files[i] is what was read of ps[i], or why not, valid until the next
// ReadAll. When a read blocks,
// ReadAll fails naming the file, and reads no file after it.
func (d *Processes) ReadAll(ctx context.Context, ps []Process, name string) ([]File, error) {
	// The batch may outlive the call: its own copies.
	dir, ps := d.fd, slices.Clone(ps)
	files := make([]File, len(ps))
	// One buffer for the lot, kept for the next call, cut into files once
	// the batch has returned; a batch given up keeps its own.
	arena := d.arena[:0]
	d.arena = nil
	if blocked := d.fs.WithContext(ctx).Batch(func(r *Reader) error {
		var buf []byte
		for i, p := range ps {
			data, err := d.read(r, dir, strconv.Itoa(p.PID)+"/"+name, buf)
			if errors.Is(err, ErrBlocked) {
				return err
			}
			buf = data
			arena = append(arena, data...)
			files[i] = File{Data: arena[len(arena)-len(data):], Err: err}
		}
		return nil
	}); blocked != nil {
		return nil, blocked
	}
	if cap(arena) <= 1<<20 { // a thousand stat files are about 300 KiB
		d.arena = arena
	}
	end := 0
	for i := range files {
		end += len(files[i].Data)
		files[i].Data = arena[end-len(files[i].Data) : end : end]
	}
	return files, nil
}

func (d *Processes) read(r *Reader, dir int, rel string, buf []byte) ([]byte, error) {
	return r.read(rel, rel, buf, taskFile, d.fs.limitFor(rel), func() (int, error) {
		if dir < 0 {
			return -1, syscall.EBADF
		}
		return syscall.Openat(dir, rel, openFlags, 0)
	})
}

// Close closes the tree's directory.
func (d *Processes) Close() error {
	if d.fd >= 0 {
		syscall.Close(d.fd)
		d.fd = -1
	}
	return nil
}

// appendPids appends the processes among the linux_dirent64 records in
// buf: inode (8 bytes), offset (8), record length (2), type (1), then the
// NUL-terminated name. A record that does not fit ends the parse.
func appendPids(ps []Process, buf []byte) []Process {
	const header = 19
	for len(buf) >= header {
		reclen := int(binary.NativeEndian.Uint16(buf[16:18]))
		if reclen < header || reclen > len(buf) {
			break
		}
		name, _, _ := bytes.Cut(buf[header:reclen], []byte{0})
		if pid, ok := parsePID(name); ok {
			ps = append(ps, Process{PID: pid, Ino: binary.NativeEndian.Uint64(buf[0:8])})
		}
		buf = buf[reclen:]
	}
	return ps
}

// parsePID reads a process directory's name: a positive decimal number
// without sign or leading zero (self, sys and meminfo are not processes).
func parsePID(name []byte) (int, bool) {
	if len(name) == 0 || len(name) > 10 || name[0] == '0' {
		return 0, false
	}
	pid := 0
	for _, c := range name {
		if c < '0' || c > '9' {
			return 0, false
		}
		pid = pid*10 + int(c-'0')
	}
	return pid, pid <= 1<<31-1
}
