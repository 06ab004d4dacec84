package diffengine

import (
	"fmt"
	"slices"
	"strconv"
)

// opKind is one step of an edit script between two lists.
type opKind uint8

const (
	opEqual   opKind = iota // a[i] == b[j], in order
	opModify                // a[i] was edited in place into b[j]
	opDelete                // a[i] is gone
	opInsert                // b[j] is new
	opMoveOut               // a[i] reappears unchanged elsewhere as b[j]
	opMoveIn                // b[j] is a[i], moved here
)

type op struct {
	kind opKind
	i, j int // -1 when the side does not exist
	// next is the index in b of the first element at or after this op in
	// the script: where an old position lands in the new list.
	next int
}

// alignment is an edit script from a to b, in list order.
type alignment struct {
	ops   []op
	oldN  int
	newN  int
	byOld []int // index into ops for each a[i]
}

// maxLCSCells bounds the quadratic LCS table; longer lists (never seen in
// strategy files, but possible in fuzzed input) are aligned by position.
const maxLCSCells = 1 << 22

// align computes a minimal edit script: the longest common subsequence of
// equal elements stays, equal elements that changed position are moves, and
// what remains in each gap is paired position by position into in-place
// edits when the two elements are of the same shape (same step kind, same
// keys), otherwise deleted and inserted.
func align(a, b []any) alignment {
	ea, eb := encodeAll(a), encodeAll(b)
	matched := lcs(ea, eb)

	// Moves: unmatched elements equal to an unmatched element on the other side.
	movedA := make([]int, len(a)) // new index + 1, or 0
	movedB := make([]int, len(b)) // old index + 1, or 0
	inLCSA := make([]bool, len(a))
	inLCSB := make([]bool, len(b))
	for _, m := range matched {
		inLCSA[m[0]], inLCSB[m[1]] = true, true
	}
	for i := range a {
		if inLCSA[i] {
			continue
		}
		for j := range b {
			if !inLCSB[j] && movedB[j] == 0 && ea[i] == eb[j] {
				movedA[i], movedB[j] = j+1, i+1
				break
			}
		}
	}

	al := alignment{oldN: len(a), newN: len(b), byOld: make([]int, len(a))}
	pi, pj := 0, 0
	// In a gap, unpaired deletions come before unpaired insertions, so an old
	// position that was deleted lands on what replaced it.
	emitGap := func(i1, j1 int) {
		var pending []op
		flush := func() {
			al.ops = append(al.ops, pending...)
			pending = pending[:0]
		}
		for k := 0; pi+k < i1 || pj+k < j1; k++ {
			i, j := pi+k, pj+k
			hasA, hasB := i < i1, j < j1
			if hasA && hasB && movedA[i] == 0 && movedB[j] == 0 && sameShape(a[i], b[j]) {
				flush()
				al.ops = append(al.ops, op{kind: opModify, i: i, j: j})
				continue
			}
			if hasA {
				kind := opDelete
				if movedA[i] != 0 {
					kind = opMoveOut
				}
				al.ops = append(al.ops, op{kind: kind, i: i, j: movedA[i] - 1})
			}
			if hasB {
				kind, from := opInsert, -1
				if movedB[j] != 0 {
					kind, from = opMoveIn, movedB[j]-1
				}
				pending = append(pending, op{kind: kind, i: from, j: j})
			}
		}
		flush()
	}
	for _, m := range matched {
		emitGap(m[0], m[1])
		al.ops = append(al.ops, op{kind: opEqual, i: m[0], j: m[1]})
		pi, pj = m[0]+1, m[1]+1
	}
	emitGap(len(a), len(b))

	next := len(b)
	for k := len(al.ops) - 1; k >= 0; k-- {
		o := &al.ops[k]
		switch o.kind {
		case opEqual, opModify, opInsert, opMoveIn:
			next = o.j
		}
		o.next = next
		switch o.kind {
		case opEqual, opModify, opDelete, opMoveOut:
			al.byOld[o.i] = k
		}
	}
	return al
}

// landing returns where old position i continues in the new list: the new
// index of the same element when it was kept or edited in place, otherwise
// the first new element after the place where it was. i == len(a) lands at
// len(b).
func (al alignment) landing(i int) int {
	if i < 0 {
		return 0
	}
	if i >= al.oldN {
		return al.newN
	}
	return al.ops[al.byOld[i]].next
}

func encodeAll(l []any) []string {
	out := make([]string, len(l))
	for i, v := range l {
		out[i] = encode(v)
	}
	return out
}

// encode is a canonical string of a tree value: JSON with sorted keys,
// written directly because it runs for every list element compared.
func encode(v any) string {
	var b []byte
	return string(appendCanonical(b, v))
}

func appendCanonical(b []byte, v any) []byte {
	switch t := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendQuote(b, k)
			b = append(b, ':')
			b = appendCanonical(b, t[k])
		}
		return append(b, '}')
	case []any:
		b = append(b, '[')
		for i, e := range t {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendCanonical(b, e)
		}
		return append(b, ']')
	case string:
		return strconv.AppendQuote(b, t)
	case float64:
		return strconv.AppendFloat(b, t, 'g', -1, 64)
	case bool:
		return strconv.AppendBool(b, t)
	case nil:
		return append(b, "null"...)
	}
	return fmt.Appendf(b, "%#v", v)
}

// lcs returns the index pairs of a longest common subsequence of a and b.
func lcs(a, b []string) [][2]int {
	// Trim the common prefix and suffix first: most edits touch few elements.
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	var out [][2]int
	for k := 0; k < pre; k++ {
		out = append(out, [2]int{k, k})
	}
	ma, mb := a[pre:len(a)-suf], b[pre:len(b)-suf]
	n, m := len(ma), len(mb)
	if n > 0 && m > 0 && n*m <= maxLCSCells {
		t := make([]int32, (n+1)*(m+1))
		w := m + 1
		for i := n - 1; i >= 0; i-- {
			for j := m - 1; j >= 0; j-- {
				if ma[i] == mb[j] {
					t[i*w+j] = t[(i+1)*w+j+1] + 1
				} else {
					t[i*w+j] = max(t[(i+1)*w+j], t[i*w+j+1])
				}
			}
		}
		for i, j := 0, 0; i < n && j < m; {
			switch {
			case ma[i] == mb[j]:
				out = append(out, [2]int{pre + i, pre + j})
				i++
				j++
			case t[(i+1)*w+j] >= t[i*w+j+1]:
				i++
			default:
				j++
			}
		}
	}
	for k := 0; k < suf; k++ {
		out = append(out, [2]int{len(a) - suf + k, len(b) - suf + k})
	}
	return out
}

// sameShape reports whether b can be described as an edit of a: two maps
// with the same keys (so two steps of the same kind), or two scalars or
// lists.
func sameShape(a, b any) bool {
	ma, okA := a.(map[string]any)
	mb, okB := b.(map[string]any)
	if okA != okB {
		return false
	}
	if !okA {
		_, la := a.([]any)
		_, lb := b.([]any)
		return la == lb
	}
	if len(ma) != len(mb) {
		return false
	}
	for k := range ma {
		if _, ok := mb[k]; !ok {
			return false
		}
	}
	return true
}
