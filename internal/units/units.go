// Package units is the one unit policy for the figures a person reads
// (docs/design.md, "Units"): memory in GiB, 2^30 bytes, as free -g and
// nvidia-smi print it; decimal GB, 10^9 bytes, only where the figure comes
// from the accounting worksheet's bytes per parameter (`plan`). Every view
// formats through here, so that a page, a report and a terminal agree.
package units

import "fmt"

const (
	// GiB is 2^30 bytes.
	GiB = 1 << 30
	// GB is 10^9 bytes.
	GB = 1e9
)

// FormatGiB writes bytes as GiB with one decimal: "16.5 GiB".
func FormatGiB(bytes float64) string { return fmt.Sprintf("%.1f GiB", bytes/GiB) }
