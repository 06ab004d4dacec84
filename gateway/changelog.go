package gateway

import (
	"slices"
	"sync/atomic"
)

// How far back a type's change log reaches: a delta stream that missed
// more generations than this, or more changed names than this, compares
// its whole subscription instead. During a commit of many rollouts a
// stream wakes, sends and finds several generations published meanwhile;
// with only the last generation's names it compared every resource of the
// type each time (gateway.(*deltaType).compareAll: 8 % of the daemon's
// CPU in a 1,000-rollout commit at 1,000 rollouts).
const (
	changeLogGenerations = 128
	changeLogNames       = 4096
)

// changeLog is the names one generation of a type added, changed or
// removed, linked to the generations before it (newest first). Each
// typeSet holds the log of its own generation; the links are cut past the
// bounds above so old generations are collected.
type changeLog struct {
	from  uint64 // generation of the set this change was made from
	names []string
	prev  atomic.Pointer[changeLog]
}

// newChangeLog records the names changed from generation from, after
// prev, and cuts the chain behind it to the bounds.
func newChangeLog(from uint64, names []string, prev *changeLog) *changeLog {
	l := &changeLog{from: from, names: names}
	l.prev.Store(prev)
	depth, total := 1, len(names)
	for n := l; n != nil; n = n.prev.Load() {
		next := n.prev.Load()
		if next == nil {
			break
		}
		if depth >= changeLogGenerations || total+len(next.names) > changeLogNames {
			n.prev.Store(nil)
			break
		}
		depth++
		total += len(next.names)
	}
	return l
}

// since returns the names changed after generation gen, each once, and
// false when the log does not reach back to gen.
func (l *changeLog) since(gen uint64) ([]string, bool) {
	var logs []*changeLog
	for n := l; n != nil; n = n.prev.Load() {
		logs = append(logs, n)
		if n.from == gen {
			return unionNames(logs), true
		}
	}
	return nil, false
}

// anyChangedSince reports whether one of names (sorted) changed after
// generation gen, and ok false when it cannot tell: the log does not reach
// back to gen and none of names changed in the part it holds. It walks the
// log in place: a stream asks on every publish.
func (l *changeLog) anyChangedSince(gen uint64, names []string) (changed, ok bool) {
	for n := l; n != nil; n = n.prev.Load() {
		if n.from < gen {
			return false, false // past gen: it is no generation of this type
		}
		for _, name := range n.names {
			if _, in := slices.BinarySearch(names, name); in {
				return true, true
			}
		}
		if n.from == gen {
			return false, true
		}
	}
	return false, false
}

func unionNames(logs []*changeLog) []string {
	if len(logs) == 1 {
		return logs[0].names
	}
	seen := map[string]bool{}
	var out []string
	for _, l := range logs {
		for _, n := range l.names {
			if !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
		}
	}
	return out
}
