package gitwatch

import (
	"errors"
	"fmt"
	"strings"

	"github.com/sluice-dev/sluice/api"
)

// Defaults of TreeLimits. Strategy repositories are a few directories
// deep; 64 levels and 4 KiB paths (Linux's PATH_MAX) are far beyond any of
// them. A directory nested 20,000 levels deep is a 744 KB push, and every
// level makes each path below it longer: reading it unbounded cost 1.7 GB
// and 90 s.
const (
	DefaultMaxTreeDepth = 64
	DefaultMaxPathBytes = 4096
)

// TreeLimits bound the shape of the tree read under --path at a commit. A
// commit over them is refused as a whole (a Refused api.Set naming the
// path), like a commit over the strategy file limits: the strategy in
// force stays. A zero field takes its default; a negative one turns that
// limit off.
type TreeLimits struct {
	// MaxDepth is how many directories deep, from the repository root, a
	// directory may be.
	MaxDepth int
	// MaxPathBytes is the longest path, from the repository root.
	MaxPathBytes int
}

func (l TreeLimits) withDefaults() TreeLimits {
	if l.MaxDepth == 0 {
		l.MaxDepth = DefaultMaxTreeDepth
	}
	if l.MaxPathBytes == 0 {
		l.MaxPathBytes = DefaultMaxPathBytes
	}
	return l
}

// depth is how many directories deep the directory name is ("." is 0).
func depth(name string) int {
	if name == "." {
		return 0
	}
	return strings.Count(name, "/") + 1
}

// checkDir refuses a directory deeper than MaxDepth.
func (l TreeLimits) checkDir(name string) error {
	if l.MaxDepth > 0 && depth(name) > l.MaxDepth {
		return &treeLimitError{path: name, reason: fmt.Sprintf("directory nested more than %d levels deep (--git-max-tree-depth)", l.MaxDepth)}
	}
	return nil
}

// checkPath refuses a path longer than MaxPathBytes; n is its length
// (given, so a child's path is checked before it is built).
func (l TreeLimits) checkPath(name string, n int) error {
	if l.MaxPathBytes > 0 && n > l.MaxPathBytes {
		return &treeLimitError{path: name, reason: fmt.Sprintf("path longer than %d bytes (--git-max-path-bytes)", l.MaxPathBytes)}
	}
	return nil
}

// treeLimitError is a tree over TreeLimits; load turns it into a Refused
// Set.
type treeLimitError struct {
	path   string
	reason string
}

func (e *treeLimitError) Error() string {
	return fmt.Sprintf("%s: %s", shortPath(e.path), e.reason)
}

// maxShownPath is how much of an offending path a diagnostic shows: the
// path may be kilobytes long, and diagnostics go to status pages and
// alerts.
const maxShownPath = 200

func shortPath(p string) string {
	if len(p) <= maxShownPath {
		return p
	}
	return p[:maxShownPath] + fmt.Sprintf("… (%d bytes)", len(p))
}

// treeRefusal turns a treeLimitError in err into the Refused Set that
// reports it.
func treeRefusal(err error) (*api.Set, bool) {
	var tle *treeLimitError
	if !errors.As(err, &tle) {
		return nil, false
	}
	return &api.Set{Refused: true, Diagnostics: api.Diagnostics{{
		File:     shortPath(tle.path),
		Message:  tle.reason + ": the commit is not loaded",
		Severity: api.SeverityError,
	}}}, true
}
