package api

import (
	"maps"
	"slices"
	"strings"
	"unique"
)

// lineIndex is a decoded document's field paths and their lines, frozen
// for as long as a Loader keeps the file. A map per document held a slot
// for every path (about 3 KB a rollout of 65 paths, a quarter of what a
// Loader keeps); this holds 12 bytes a path. The paths are interned
// (unique): files of one shape have the same ones.
type lineIndex struct {
	paths []unique.Handle[string] // sorted by value
	lines []int32                 // lines[i] is the line of paths[i]
}

func freezeLines(lines map[string]int) lineIndex {
	keys := slices.Sorted(maps.Keys(lines))
	idx := lineIndex{paths: make([]unique.Handle[string], len(keys)), lines: make([]int32, len(keys))}
	for i, k := range keys {
		idx.paths[i], idx.lines[i] = unique.Make(k), int32(lines[k])
	}
	return idx
}

// lookup returns the line of path, if the document has it.
func (x *lineIndex) lookup(path string) (int, bool) {
	i, ok := slices.BinarySearchFunc(x.paths, path, func(h unique.Handle[string], p string) int {
		return strings.Compare(h.Value(), p)
	})
	if !ok {
		return 0, false
	}
	return int(x.lines[i]), true
}
