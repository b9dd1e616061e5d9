package thermallog

import (
	"errors"
	"io"
	"os"
	"strings"

	"github.com/spark-exporter/spark_exporter/internal/hostfs"
)

// Writer appends rows to a log file, one write per call so that every
// sample reaches the file as it is taken. It never truncates: a restarted
// exporter appends to the same log under the header written when the file
// was new. A failed write closes the file; the next call opens it again,
// so a log on a disk that came back or in a directory that was created
// resumes by itself. Errors never name the file's path.
type Writer struct {
	path string
	f    *os.File
}

// NewWriter returns a writer for path; the file is opened on the first
// Append.
func NewWriter(path string) *Writer { return &Writer{path: path} }

// Append writes the rows, each on its own line.
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
		return hostfs.OpWithoutPath(err)
	}
	return nil
}

// open opens the file for appending and returns what must precede the
// first row: the header for a new (empty) file, a line end for a file whose
// last line was cut short (a crash or a full disk mid-write).
func (w *Writer) open() (string, error) {
	f, err := os.OpenFile(w.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return "", hostfs.OpWithoutPath(err)
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return "", hostfs.OpWithoutPath(err)
	}
	if !info.Mode().IsRegular() {
		f.Close()
		return "", errors.New("open: not a regular file")
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

// endsWithNewline reports whether the file's last byte is a line end. A
// file that cannot be read back (write-only permissions) is taken as
// complete.
func endsWithNewline(path string, size int64) bool {
	f, err := os.Open(path)
	if err != nil {
		return true
	}
	defer f.Close()
	last := make([]byte, 1)
	if _, err := f.ReadAt(last, size-1); err != nil {
		return true
	}
	return last[0] == '\n'
}

// Close closes the file, if open.
func (w *Writer) Close() error {
	if w.f == nil {
		return nil
	}
	err := w.f.Close()
	w.f = nil
	return hostfs.OpWithoutPath(err)
}
