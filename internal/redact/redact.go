// Package redact takes paths out of what the exporter shows: a mount
// point, a config file or a certificate may sit in a private directory,
// and logs, status pages and JSON go to whoever reads them.
package redact

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
)

// UnderRoots makes paths in msg under each root relative to it, a root itself
// ".": "open /srv/x/proc/meminfo: …" reads "open meminfo: …".
func UnderRoots(msg string, roots ...string) string {
	var renamings []Renaming
	for _, root := range roots {
		if len(root) > 1 { // "" or "/": nothing to cut
			renamings = append(renamings, Renaming{root + string(filepath.Separator), ""}, Renaming{root, "."})
		}
	}
	return ReplacePaths(msg, renamings)
}

// Renaming is a path and what it reads as once redacted.
type Renaming struct{ Path, Name string }

// ReplacePaths replaces every path of renamings in msg by its name, the
// longest first, so that a path is not half replaced by one it contains.
func ReplacePaths(msg string, renamings []Renaming) string {
	sorted := slices.Clone(renamings)
	slices.SortStableFunc(sorted, func(a, b Renaming) int { return cmp.Compare(len(b.Path), len(a.Path)) })
	for _, r := range sorted {
		if r.Path != "" {
			msg = strings.ReplaceAll(msg, r.Path, r.Name)
		}
	}
	return msg
}

// WithoutPath drops the path and operation of an *fs.PathError in err.
func WithoutPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// OpWithoutPath is WithoutPath keeping the operation: "open: permission
// denied", for a caller whose operations fail differently.
func OpWithoutPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return err
}
