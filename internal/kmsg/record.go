// Package kmsg reads the kernel's log as /dev/kmsg serves it and counts the
// events that tell why a DGX Spark died: OOM kills by their constraint, the
// GPU driver's failed allocations (NV_ERR_NO_MEMORY), NVRM Xid codes and
// PCIe AER errors by severity.
package kmsg

import (
	"bytes"
	"errors"
	"strconv"
	"time"
)

// Record is one record of /dev/kmsg (Documentation/ABI/testing/dev-kmsg):
//
//	6,339,5140900,-;NET: Registered protocol family 10
//	 SUBSYSTEM=net
//
// a header (priority and facility, sequence number, microseconds since boot,
// flags, perhaps more in later kernels), a semicolon, the message with
// non-printable bytes escaped as \xNN, and continuation lines, each starting
// with a space, of the logging device's properties.
type Record struct {
	// Priority is the syslog level, 0 (emerg) to 7 (debug); Facility the
	// syslog facility (0: the kernel's own).
	Priority, Facility int
	Seq                uint64
	// Since is the time since boot the record was logged at.
	Since   time.Duration
	Message string
}

// MaxRecord bounds a record: the kernel never writes one longer
// (CONSOLE_EXT_LOG_MAX is 8 KiB, a read of /dev/kmsg needs that much room).
const MaxRecord = 8192

var (
	errNoHeader = errors.New("kmsg: no header (no ';')")
	errHeader   = errors.New("kmsg: malformed header")
)

// Parse parses one record's first line; the caller skips continuation
// lines. A malformed line is an error, never a panic.
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
