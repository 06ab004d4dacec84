package diffengine

import (
	"strconv"
	"strings"
)

// segKind says how a path segment is written.
type segKind uint8

const (
	segField segKind = iota // .name, or ["odd/key"] for keys that are not identifiers
	segIndex                // [3]
	segNamed                // [name] for an element of a named list
)

type seg struct {
	kind  segKind
	name  string
	index int
}

// fieldPath is built while walking a tree and rendered only when a change
// is recorded, so unchanged subtrees cost no string work.
type fieldPath []seg

// with returns p extended by s. It never aliases p's backing array, so
// sibling calls cannot overwrite each other's segments.
func (p fieldPath) with(s seg) fieldPath {
	q := make(fieldPath, len(p), len(p)+1)
	copy(q, p)
	return append(q, s)
}

func (p fieldPath) field(name string) fieldPath { return p.with(seg{kind: segField, name: name}) }
func (p fieldPath) index(i int) fieldPath       { return p.with(seg{kind: segIndex, index: i}) }
func (p fieldPath) named(name string) fieldPath { return p.with(seg{kind: segNamed, name: name}) }

func (p fieldPath) String() string {
	var b strings.Builder
	for i, s := range p {
		switch s.kind {
		case segField:
			if isIdent(s.name) {
				if i > 0 {
					b.WriteByte('.')
				}
				b.WriteString(s.name)
			} else {
				b.WriteByte('[')
				b.WriteString(strconv.Quote(s.name))
				b.WriteByte(']')
			}
		case segIndex:
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(s.index))
			b.WriteByte(']')
		case segNamed:
			b.WriteByte('[')
			b.WriteString(s.name)
			b.WriteByte(']')
		}
	}
	return b.String()
}

// isIdent reports whether a map key can be written after a dot.
func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z'):
		case i > 0 && (r == '-' || (r >= '0' && r <= '9')):
		default:
			return false
		}
	}
	return true
}
