// Package units formats memory in GiB, as free -g and nvidia-smi print it
// (docs/design.md, "Units"), so that a page, a report and a terminal agree.
package units

import "fmt"

const gib = 1 << 30

func FormatGiB(bytes float64) string { return fmt.Sprintf("%.1f GiB", bytes/gib) }
