// Package kmsg counts the kernel log's events that tell why a DGX Spark died.
package kmsg

import (
	"bytes"
	"errors"
	"strconv"
	"time"
)

// Record is one record of /dev/kmsg (Documentation/ABI/testing/dev-kmsg), e.g.
// "6,339,5140900,-;NET: Registered protocol family 10"; later kernels may add header fields.
type Record struct {
	Priority, Facility int
	Seq                uint64
	Since              time.Duration
	Message            string
}

// MaxRecord is CONSOLE_EXT_LOG_MAX: the kernel never writes a longer one.
const MaxRecord = 8192

var (
	errNoHeader = errors.New("kmsg: no header (no ';')")
	errHeader   = errors.New("kmsg: malformed header")
)

// Parse parses one record's first line; the caller skips continuation lines.
func Parse(line []byte) (Record, error) {
	line = bytes.TrimRight(line, "\n")
	if len(line) > MaxRecord {
		return Record{}, errors.New("kmsg: record longer than the kernel writes")
	}
	header, message, ok := bytes.Cut(line, []byte{';'})
	if !ok {
		return Record{}, errNoHeader
	}
	// The kernel writes the flags field too; a writer that leaves it out
	// (a test, another tool's log) is read all the same.
	fields := bytes.SplitN(header, []byte{','}, 5)
	if len(fields) < 3 {
		return Record{}, errHeader
	}
	prefix, err := strconv.ParseUint(string(fields[0]), 10, 32)
	if err != nil {
		return Record{}, errHeader
	}
	seq, err := strconv.ParseUint(string(fields[1]), 10, 64)
	if err != nil {
		return Record{}, errHeader
	}
	usec, err := strconv.ParseUint(string(fields[2]), 10, 63)
	if err != nil || usec > uint64(1<<63-1)/uint64(time.Microsecond) {
		return Record{}, errHeader
	}
	return Record{
		Priority: int(prefix & 7), Facility: int(prefix >> 3),
		Seq: seq, Since: time.Duration(usec) * time.Microsecond,
		Message: string(message),
	}, nil
}
