package api

import (
	"errors"
	"fmt"
)

// Defaults of Limits. A strategy file is a few KB (a Rollout with ten steps
// and its endpoints is about 2 KB), so 1 MiB per file leaves room for
// hundreds of documents in one file while refusing a blob that would cost
// the daemon gigabytes once parsed (a YAML node takes ~10× its source).
// 64 MiB and 20,000 files hold the 10,000-rollout repository the scale
// target names (about 20 MiB in 10,000 files plus their templates) three
// times over, and bound what one commit can make the daemon read.
const (
	DefaultMaxFileBytes     int64 = 1 << 20
	DefaultMaxRevisionBytes int64 = 64 << 20
	DefaultMaxFiles               = 20000
)

// Limits bound what loading one tree of strategy files may cost. A zero
// field takes its default; a negative one turns that limit off.
type Limits struct {
	// MaxFileBytes is the largest strategy file read. A larger file is
	// never read: its size comes from fs.Stat (the git blob header), and
	// the file is reported as unreadable, so its rollouts keep running.
	MaxFileBytes int64
	// MaxRevisionBytes bounds the strategy files of one tree together.
	// Past it the whole tree is refused (Set.Refused).
	MaxRevisionBytes int64
	// MaxFiles bounds the number of strategy files in one tree. Past it the
	// whole tree is refused (Set.Refused).
	MaxFiles int
}

// withDefaults fills zero fields.
func (l Limits) withDefaults() Limits {
	if l.MaxFileBytes == 0 {
		l.MaxFileBytes = DefaultMaxFileBytes
	}
	if l.MaxRevisionBytes == 0 {
		l.MaxRevisionBytes = DefaultMaxRevisionBytes
	}
	if l.MaxFiles == 0 {
		l.MaxFiles = DefaultMaxFiles
	}
	return l
}

// fileTooLarge says why a file of size bytes is refused, or "" when it is not.
func (l Limits) fileTooLarge(size int64) string {
	if l.MaxFileBytes > 0 && size > l.MaxFileBytes {
		return fmt.Sprintf("file is %d bytes, over the limit of %d bytes per strategy file (--strategy-max-file-bytes): not read", size, l.MaxFileBytes)
	}
	return ""
}

// ErrLimit is wrapped by every LimitError.
var ErrLimit = errors.New("strategy file limit exceeded")

// LimitError refuses a whole tree of strategy files: too many files or too
// many bytes. Diagnostic names the file that went over the limit.
type LimitError struct {
	Diagnostic Diagnostic
}

func (e *LimitError) Error() string { return e.Diagnostic.String() }

// Unwrap makes errors.Is(err, ErrLimit) true.
func (e *LimitError) Unwrap() error { return ErrLimit }

// treeBudget counts the files and bytes of one tree against Limits.
type treeBudget struct {
	limits Limits
	files  int
	bytes  int64
}

// add counts one file of size bytes; it fails once the tree is over a limit.
func (b *treeBudget) add(name string, size int64) error {
	b.files++
	b.bytes += size
	switch {
	case b.limits.MaxFiles > 0 && b.files > b.limits.MaxFiles:
		return b.refuse(name, "more than %d strategy files in this revision (--strategy-max-files): the revision is not loaded", b.limits.MaxFiles)
	case b.limits.MaxRevisionBytes > 0 && b.bytes > b.limits.MaxRevisionBytes:
		return b.refuse(name, "strategy files of this revision exceed %d bytes with this file (--strategy-max-revision-bytes): the revision is not loaded", b.limits.MaxRevisionBytes)
	}
	return nil
}

func (b *treeBudget) refuse(name, format string, args ...any) error {
	return &LimitError{Diagnostic: Diagnostic{File: name, Message: fmt.Sprintf(format, args...), Severity: SeverityError}}
}

// refusedSet is the Set of a tree refused as a whole.
func refusedSet(d Diagnostic) *Set {
	return &Set{Refused: true, Diagnostics: Diagnostics{d}}
}
