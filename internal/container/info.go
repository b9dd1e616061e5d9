package container

import (
	"unicode/utf8"

	"github.com/spark-exporter/spark_exporter/internal/safetext"
)

// Info is what the Docker Engine names a container by.
type Info struct {
	ID             string // as Ref.ID
	Name           string // without Docker's leading slash
	Image          string
	ComposeService string // the com.docker.compose.service label
}

// maxLabel: an image reference's name part is at most 255 bytes.
const maxLabel = 256

// Label returns s if it may be a label's value as it is, else "": a name cut
// or changed would name something else.
func Label(s string) string {
	if len(s) > maxLabel || !utf8.ValidString(s) || safetext.Index(s) >= 0 {
		return ""
	}
	return s
}

// ShortID is false for anything but 64 lowercase hex digits.
func ShortID(id string) (short string, ok bool) {
	if len(id) != 64 || !isHex(id) {
		return "", false
	}
	return id[:ShortIDLength], true
}
