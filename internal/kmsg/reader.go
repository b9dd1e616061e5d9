package kmsg

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"sync"
	"syscall"
)

// Reader follows the kernel log in the background and keeps its counts.
//
// Opening /dev/kmsg starts at the oldest record the ring still holds, so the
// counts are "since boot, as far as the ring holds them": a restarted
// exporter recounts the same records, its counters restarting, which
// Prometheus reads as a reset. Within one reader, a record whose sequence
// number is not above the last one counted is skipped.
type Reader struct {
	mu       sync.Mutex
	counts   Counts
	lines    lineSplitter
	classify Classifier
	lastSeq  uint64
	seen     bool

	file *os.File // nil when there is nothing to follow
	done chan struct{}
}

// Open opens the log at path (/dev/kmsg, or a file or FIFO for tests), reads
// what it holds now, and follows a device or FIFO in the background; the
// first reads never block. An error means the log cannot be read (no
// CAP_SYSLOG where kernel.dmesg_restrict is set, no such file).
func Open(path string) (*Reader, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	r := &Reader{counts: NewCounts(), done: make(chan struct{})}
	buf := make([]byte, MaxRecord+1)
	follow := true
	for {
		n, err := syscall.Read(fd, buf)
		if n > 0 {
			r.feed(buf[:n])
			continue
		}
		if err == syscall.EPIPE {
			r.overrun()
			continue
		}
		if err == syscall.EINTR {
			continue
		}
		if err == syscall.EAGAIN {
			break
		}
		if err != nil {
			syscall.Close(fd)
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		// n == 0: the end of a file, or a FIFO without a writer.
		follow = false
		break
	}
	if !follow {
		syscall.Close(fd)
		close(r.done)
		return r, nil
	}
	// A non-blocking descriptor goes to the runtime's poller: a read waits
	// there, not in a thread, and Close ends it.
	r.file = os.NewFile(uintptr(fd), path)
	go r.follow(buf)
	return r, nil
}

func (r *Reader) follow(buf []byte) {
	defer close(r.done)
	for {
		n, err := r.file.Read(buf)
		if n > 0 {
			r.feed(buf[:n])
		}
		switch {
		case err == nil:
		case errors.Is(err, syscall.EPIPE):
			// The ring wrapped past the next record: the following
			// read returns the oldest record still held.
			r.overrun()
		case errors.Is(err, syscall.EINTR), errors.Is(err, syscall.EAGAIN):
		default: // io.EOF, os.ErrClosed, or a failing device
			return
		}
	}
}

// Counts is a copy of the counts so far.
func (r *Reader) Counts() Counts {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts.Clone()
}

// Close stops following and waits for the reader to end.
func (r *Reader) Close() error {
	var err error
	if r.file != nil {
		err = r.file.Close()
	}
	<-r.done
	return err
}

func (r *Reader) overrun() {
	r.mu.Lock()
	r.counts.Overruns++
	r.mu.Unlock()
}

// feed counts the whole records in data; a record cut between two reads
// (a file, a FIFO) is completed by the next.
func (r *Reader) feed(data []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines.split(data, r.line)
}

func (r *Reader) line(line []byte) {
	if len(line) == 0 || line[0] == ' ' {
		return // a continuation line: a property of the record before
	}
	rec, err := Parse(line)
	if err != nil {
		r.counts.Malformed++
		return
	}
	if r.seen && rec.Seq <= r.lastSeq {
		return
	}
	r.seen, r.lastSeq = true, rec.Seq
	if ev, ok := r.classify.Classify(rec.Message); ok {
		r.counts.Add(ev)
	}
}

// lineSplitter cuts a stream into lines of at most MaxRecord bytes; a
// longer line is dropped whole, so that memory stays bounded.
type lineSplitter struct {
	partial []byte
	tooLong bool
}

func (s *lineSplitter) split(data []byte, line func([]byte)) {
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			if len(s.partial)+len(data) > MaxRecord {
				s.partial, s.tooLong = s.partial[:0], true
			} else if !s.tooLong {
				s.partial = append(s.partial, data...)
			}
			return
		}
		chunk := data[:i]
		data = data[i+1:]
		switch {
		case s.tooLong:
			s.tooLong = false
		case len(s.partial) > 0:
			if len(s.partial)+len(chunk) <= MaxRecord {
				line(append(s.partial, chunk...))
			}
		default:
			line(chunk)
		}
		s.partial = s.partial[:0]
	}
}
