package kmsg

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Reader counts "since boot, as far as the ring holds them": a restarted
// exporter recounts the same records, which Prometheus reads as a reset.
type Reader struct {
	mu       sync.Mutex
	counts   Counts
	lines    lineSplitter
	classify classifier
	lastSeq  uint64
	seen     bool
	overrun  bool // an EPIPE since the last record read
	readable bool

	file *os.File
	buf  []byte
	fifo bool
	stop chan struct{}
	done chan struct{} // nil until Start
}

const (
	// kernelFacility: devkmsg_write sets LOG_USER for a prefix whose facility is 0.
	kernelFacility = 0
	// maxFileBytes: log_buf_len is at most a few tens of MiB.
	maxFileBytes = 64 << 20
	catchUpBytes = 1 << 20
	catchUpTime  = 200 * time.Millisecond
	fifoRetry    = time.Second
)

var (
	errKind     = errors.New("kmsg: not /dev/kmsg, a regular file or a FIFO")
	errDevice   = errors.New("kmsg: a character device other than /dev/kmsg (1:11)")
	errTooLarge = errors.New("kmsg: a file larger than any kernel log (64 MiB)")
	kmsgDevice  = unix.Mkdev(1, 11)
)

// Open reads what the log holds now within catchUpBytes and catchUpTime;
// Start reads the rest. path is /dev/kmsg, or a file or FIFO for tests.
func Open(path string) (*Reader, error) {
	// Checked before the open, which has effects on some devices (a
	// watchdog), and again on what was opened.
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return nil, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	if _, err := sourceKind(&st); err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	fifo, err := openedKind(fd)
	if err != nil {
		unix.Close(fd)
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	r := &Reader{counts: NewCounts(), fifo: fifo, stop: make(chan struct{})}
	buf := make([]byte, maxRecord+1)
	more, err := r.catchUp(fd, buf)
	if err != nil || !more {
		unix.Close(fd)
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		return r, nil
	}
	// Non-blocking: a read waits in the runtime's poller, and Close ends it.
	r.file, r.buf = os.NewFile(uintptr(fd), path), buf
	return r, nil
}

// Start follows the log in the background until Close; call it once.
func (r *Reader) Start() {
	if r.file == nil {
		return
	}
	r.done = make(chan struct{})
	go r.follow(r.buf)
}

func sourceKind(st *unix.Stat_t) (fifo bool, err error) {
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		if st.Size > maxFileBytes {
			return false, errTooLarge
		}
		return false, nil
	case unix.S_IFCHR:
		if st.Rdev != kmsgDevice {
			return false, errDevice
		}
		return false, nil
	case unix.S_IFIFO:
		return true, nil
	}
	return false, errKind
}

func openedKind(fd int) (fifo bool, err error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return false, err
	}
	return sourceKind(&st)
}

// catchUp: the first scrape counts what the log holds now; more is false at a regular file's end.
func (r *Reader) catchUp(fd int, buf []byte) (more bool, err error) {
	deadline := time.Now().Add(catchUpTime)
	for total := 0; total < catchUpBytes && time.Now().Before(deadline); {
		n, err := unix.Read(fd, buf)
		switch {
		case n > 0:
			r.feed(buf[:n])
			total += n
		case err == unix.EPIPE:
			r.lost()
		case err == unix.EINTR:
		case err == unix.EAGAIN:
			r.answered()
			return true, nil
		case err != nil:
			return false, err
		default: // the end of a file, or a FIFO without a writer
			r.answered()
			return r.fifo, nil
		}
	}
	return true, nil
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
		case errors.Is(err, unix.EPIPE):
			// The ring wrapped past the next record: the following
			// read returns the oldest record still held.
			r.lost()
		case errors.Is(err, unix.EINTR), errors.Is(err, unix.EAGAIN):
		case err == io.EOF && r.fifo:
			// No writer: a read returns at once until one comes.
			select {
			case <-r.stop:
				return
			case <-time.After(fifoRetry):
			}
		default: // io.EOF, os.ErrClosed, or a failing device
			return
		}
	}
}

// Readable: a FIFO once it was read, the others once opened.
func (r *Reader) Readable() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.readable
}

func (r *Reader) Counts() Counts {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts.clone()
}

func (r *Reader) Close() error {
	var err error
	if r.file != nil {
		close(r.stop)
		err = r.file.Close()
	}
	if r.done != nil {
		<-r.done
	}
	return err
}

func (r *Reader) answered() {
	if !r.fifo {
		r.mu.Lock()
		r.readable = true
		r.mu.Unlock()
	}
}

func (r *Reader) lost() {
	r.mu.Lock()
	r.overrun = true
	r.mu.Unlock()
}

// feed: a record cut between two reads is completed by the next.
func (r *Reader) feed(data []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.readable = true
	r.lines.split(data, r.line, func() { r.counts.Skipped[Malformed]++ })
}

func (r *Reader) line(line []byte) {
	if len(line) == 0 || line[0] == ' ' {
		return // a continuation line: a property of the record before
	}
	rec, err := parse(line)
	if err != nil {
		r.counts.Skipped[Malformed]++
		return
	}
	if r.overrun {
		r.counts.Skipped[Overrun] += r.gap(rec.Seq)
		r.overrun = false
	}
	if r.seen && rec.Seq <= r.lastSeq {
		return
	}
	r.seen, r.lastSeq = true, rec.Seq
	if rec.Facility != kernelFacility {
		r.counts.Skipped[NotKernel]++
		return
	}
	if ev, ok := r.classify.classify(rec.Message); ok {
		r.counts.add(ev)
	}
}

// gap is at least one where no record was read before.
func (r *Reader) gap(seq uint64) uint64 {
	if r.seen && seq > r.lastSeq {
		return seq - r.lastSeq - 1
	}
	return 1
}

// lineSplitter drops a line longer than maxRecord whole, so that memory stays bounded.
type lineSplitter struct {
	partial []byte
	tooLong bool
}

func (s *lineSplitter) split(data []byte, line func([]byte), tooLong func()) {
	for len(data) > 0 {
		end := bytes.IndexByte(data, '\n')
		chunk := data
		if end >= 0 {
			chunk = data[:end]
		}
		if !s.tooLong && len(s.partial)+len(chunk) > maxRecord {
			s.partial, s.tooLong = s.partial[:0], true
			tooLong()
		}
		if !s.tooLong {
			s.partial = append(s.partial, chunk...)
		}
		if end < 0 {
			return
		}
		data = data[end+1:]
		if !s.tooLong {
			line(s.partial)
		}
		s.partial, s.tooLong = s.partial[:0], false
	}
}
