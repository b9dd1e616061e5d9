package thermallog

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"

	"github.com/spark-exporter/spark_exporter/internal/redact"
)

// Writer: a failed write closes the file and the next call reopens it, so a log
// on a disk that came back resumes by itself. Errors never name the path.
// O_NOFOLLOW, or a link to /etc/passwd would get lines appended; O_NONBLOCK,
// or opening a pipe would wait for a reader, and the sampler with it.
type Writer struct {
	path string
	f    *os.File
}

func NewWriter(path string) *Writer { return &Writer{path: path} }

// Append writes once a call, so that a sample reaches the file as it is taken.
func (w *Writer) Append(rows ...Row) error {
	var b strings.Builder
	if w.f == nil {
		prefix, err := w.open()
		if err != nil {
			return err
		}
		b.WriteString(prefix)
	}
	for _, r := range rows {
		b.WriteString(Format(r))
		b.WriteByte('\n')
	}
	if _, err := io.WriteString(w.f, b.String()); err != nil {
		w.f.Close()
		w.f = nil
		return redact.OpWithoutPath(err)
	}
	return nil
}

// open returns a line end for a last line cut short (a crash or a full disk).
func (w *Writer) open() (string, error) {
	fd, err := syscall.Open(w.path, syscall.O_WRONLY|syscall.O_APPEND|syscall.O_CREAT|
		syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0o644)
	switch {
	case errors.Is(err, syscall.ELOOP):
		return "", errors.New("open: a symbolic link, not followed")
	case errors.Is(err, syscall.ENXIO):
		// A named pipe without a reader.
		return "", errNotRegular
	case err != nil:
		return "", fmt.Errorf("open: %w", err)
	}
	f := os.NewFile(uintptr(fd), w.path)
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return "", redact.OpWithoutPath(err)
	}
	if !info.Mode().IsRegular() {
		f.Close()
		return "", errNotRegular
	}
	w.f = f
	if info.Size() == 0 {
		return Header + "\n", nil
	}
	if !endsWithNewline(w.path, info.Size()) {
		return "\n", nil
	}
	return "", nil
}

// endsWithNewline takes a file it cannot read back (write-only) as complete.
func endsWithNewline(path string, size int64) bool {
	// Opened as the log was: the path may have been replaced since.
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return true
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	last := make([]byte, 1)
	if _, err := f.ReadAt(last, size-1); err != nil {
		return true
	}
	return last[0] == '\n'
}

var errNotRegular = errors.New("open: not a regular file")

func (w *Writer) Close() error {
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	return redact.OpWithoutPath(err)
}
