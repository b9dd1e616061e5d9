// Package redact takes paths out of what the exporter shows: a mount point
// or a config file may sit in a private directory.
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

// UnderRoots: "open /srv/x/proc/meminfo: …" reads "open meminfo: …".
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

// ReplacePaths goes longest first, so that no path is half replaced by one it contains.
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

// OpWithoutPath keeps the operation: "open: permission denied".
func OpWithoutPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return err
}
