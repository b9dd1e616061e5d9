// Package kmsg counts the kernel log's events that tell why a DGX Spark died.
package kmsg

import (
	"bytes"
	"errors"
	"strconv"
	"time"
)

// record is one record of /dev/kmsg (Documentation/ABI/testing/dev-kmsg), e.g.
// "6,339,5140900,-;NET: Registered protocol family 10"; later kernels may add header fields.
type record struct {
	Priority, Facility int
	Seq                uint64
	Since              time.Duration
	Message            string
}

// maxRecord is CONSOLE_EXT_LOG_MAX: the kernel never writes a longer one.
const maxRecord = 8192

var (
	errNoHeader = errors.New("kmsg: no header (no ';')")
	errHeader   = errors.New("kmsg: malformed header")
)

// parse parses one record's first line; the caller skips continuation lines.
func parse(line []byte) (record, error) {
	line = bytes.TrimRight(line, "\n")
	if len(line) > maxRecord {
		return record{}, errors.New("kmsg: record longer than the kernel writes")
	}
	header, message, ok := bytes.Cut(line, []byte{';'})
	if !ok {
		return record{}, errNoHeader
	}
	// The kernel writes the flags field too; a writer that leaves it out
	// (a test, another tool's log) is read all the same.
	fields := bytes.SplitN(header, []byte{','}, 5)
	if len(fields) < 3 {
		return record{}, errHeader
	}
	prefix, err := strconv.ParseUint(string(fields[0]), 10, 32)
	if err != nil {
		return record{}, errHeader
	}
	seq, err := strconv.ParseUint(string(fields[1]), 10, 64)
	if err != nil {
		return record{}, errHeader
	}
	usec, err := strconv.ParseUint(string(fields[2]), 10, 63)
	if err != nil || usec > uint64(1<<63-1)/uint64(time.Microsecond) {
		return record{}, errHeader
	}
	return record{
		Priority: int(prefix & 7), Facility: int(prefix >> 3),
		Seq: seq, Since: time.Duration(usec) * time.Microsecond,
		Message: string(message),
	}, nil
}
