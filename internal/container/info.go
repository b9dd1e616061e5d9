package container

import (
	"unicode/utf8"

	"github.com/spark-exporter/spark_exporter/internal/safetext"
)

// Info is what the Docker Engine names a container by.
type Info struct {
	// ID is the short ID (ShortIDLength hex digits), as Ref.ID.
	ID string
	// Name without Docker's leading slash.
	Name  string
	Image string
	// ComposeService is the com.docker.compose.service label.
	ComposeService string
}

// maxLabel bounds each text kept: Docker's names and image references
// are far shorter (a reference's name part is at most 255 bytes).
const maxLabel = 256

// Label returns s when it may be a label's value as it is (valid UTF-8, at
// most maxLabel bytes, no character safetext refuses), else "": a name cut or
// changed would name something else.
func Label(s string) string {
	if len(s) > maxLabel || !utf8.ValidString(s) || safetext.Index(s) >= 0 {
		return ""
	}
	return s
}

// ShortID is the short form of a full container ID (64 lowercase hex
// digits); ok is false for anything else.
func ShortID(id string) (short string, ok bool) {
	if len(id) != 64 || !isHex(id) {
		return "", false
	}
	return id[:ShortIDLength], true
}
