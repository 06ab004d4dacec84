package scheduler

import (
	"context"
	"fmt"
	"slices"
)

// NodeAffinityName is the name of the node selector / required node
// affinity filter.
const NodeAffinityName = "NodeAffinity"

// maxSelectorCache bounds how many distinct selectors NodeAffinity keeps
// verdicts for.
const maxSelectorCache = 64

// NodeAffinity rejects nodes that do not match the pod's nodeSelector or,
// when it has any, none of its required affinity terms.
//
// Pods of one rollout share their selector, so verdicts are memoised per
// distinct selector and node until any node changes (Graph.nodeGen): after
// the first pod, a check is one byte read instead of a label scan.
type NodeAffinity struct {
	g        *Graph
	key      StateKey
	mismatch *Status
	gen      uint64
	cache    []*selectorMemo
	tick     uint64
}

// selectorMemo holds one compiled selector and its verdict per node ID:
// 0 not yet known, 1 match, 2 mismatch.
type selectorMemo struct {
	hash     uint64
	selector []labelPair
	reqs     []compiledReq
	termEnds []int
	vals     []int32
	verdict  []uint8
	used     uint64
}

var (
	_ PreFilterPlugin   = &NodeAffinity{}
	_ FilterPlugin      = &NodeAffinity{}
	_ BatchFilterPlugin = &NodeAffinity{}
)

// NewNodeAffinity builds the filter. It takes no args.
func NewNodeAffinity(args any, h Handle) (Plugin, error) {
	if args != nil {
		return nil, fmt.Errorf("%s: unexpected args %T", NodeAffinityName, args)
	}
	return &NodeAffinity{
		g:        h.Graph(),
		key:      h.StateKey(),
		mismatch: NewStatus(UnschedulableAndUnresolvable, "node(s) didn't match Pod's node affinity/selector").WithPlugin(NodeAffinityName),
	}, nil
}

// Name implements Plugin.
func (a *NodeAffinity) Name() string { return NodeAffinityName }

// PreFilter implements PreFilterPlugin: it finds (or makes) the memo of
// the pod's selector; nil in the state means the pod has no selector.
func (a *NodeAffinity) PreFilter(_ context.Context, state *CycleState, pod *PodInfo) *Status {
	for _, r := range pod.reqs {
		switch r.op {
		case SelectorIn, SelectorNotIn, SelectorExists, SelectorDoesNotExist:
		default:
			return NewStatus(UnschedulableAndUnresolvable, fmt.Sprintf("unsupported node affinity operator %q", r.op)).WithPlugin(NodeAffinityName)
		}
	}
	if len(pod.selector) == 0 && len(pod.termEnds) == 0 {
		state.Write(a.key, (*selectorMemo)(nil))
		return nil
	}
	if a.gen != a.g.nodeGen {
		a.gen = a.g.nodeGen
		for _, m := range a.cache {
			m.verdict = resetVerdicts(m.verdict, len(a.g.nodes))
		}
	}
	a.tick++
	h := selectorHash(pod)
	for _, m := range a.cache {
		if m.hash == h && m.same(pod) {
			m.used = a.tick
			state.Write(a.key, m)
			return nil
		}
	}
	var m *selectorMemo
	if len(a.cache) < maxSelectorCache {
		m = &selectorMemo{}
		a.cache = append(a.cache, m)
	} else {
		m = slices.MinFunc(a.cache, func(x, y *selectorMemo) int { return int(x.used) - int(y.used) })
	}
	m.hash, m.used = h, a.tick
	m.selector = append(m.selector[:0], pod.selector...)
	m.reqs = append(m.reqs[:0], pod.reqs...)
	m.termEnds = append(m.termEnds[:0], pod.termEnds...)
	m.vals = append(m.vals[:0], pod.vals...)
	m.verdict = resetVerdicts(m.verdict, len(a.g.nodes))
	state.Write(a.key, m)
	return nil
}

func resetVerdicts(v []uint8, n int) []uint8 {
	if cap(v) < n {
		return make([]uint8, n, n+n/4)
	}
	v = v[:n]
	clear(v)
	return v
}

// selectorHash is FNV-1a over the compiled selector and terms.
func selectorHash(pod *PodInfo) uint64 {
	h := uint64(14695981039346656037)
	mix := func(v int64) {
		h ^= uint64(v)
		h *= 1099511628211
	}
	for _, s := range pod.selector {
		mix(int64(s.key))
		mix(int64(s.val))
	}
	mix(-1)
	for _, r := range pod.reqs {
		mix(int64(r.key))
		mix(int64(len(r.op)))
		mix(int64(r.op[0]))
		mix(int64(r.to - r.from))
	}
	for _, e := range pod.termEnds {
		mix(int64(e))
	}
	for _, v := range pod.vals {
		mix(int64(v))
	}
	return h
}

func (m *selectorMemo) same(pod *PodInfo) bool {
	return slices.Equal(m.selector, pod.selector) && slices.Equal(m.reqs, pod.reqs) &&
		slices.Equal(m.termEnds, pod.termEnds) && slices.Equal(m.vals, pod.vals)
}

// Filter implements FilterPlugin. Workers check different nodes, so each
// verdict byte has one writer.
func (a *NodeAffinity) Filter(_ context.Context, state *CycleState, pod *PodInfo, n *NodeState) *Status {
	m, _ := state.Read(a.key).(*selectorMemo)
	if m == nil {
		if len(pod.selector) == 0 && len(pod.termEnds) == 0 {
			return nil
		}
		// Called without PreFilter (Explain runs it, but be safe).
		if matchesSelector(pod.selector, pod.reqs, pod.termEnds, pod.vals, &a.g.cold[n.id]) {
			return nil
		}
		return a.mismatch
	}
	switch m.verdict[n.id] {
	case 1:
		return nil
	case 2:
		return a.mismatch
	}
	if matchesSelector(m.selector, m.reqs, m.termEnds, m.vals, &a.g.cold[n.id]) {
		m.verdict[n.id] = 1
		return nil
	}
	m.verdict[n.id] = 2
	return a.mismatch
}

// FilterNodes implements BatchFilterPlugin: one state read per batch, then
// a byte per node once the memo knows it.
func (a *NodeAffinity) FilterNodes(ctx context.Context, state *CycleState, pod *PodInfo, ids []int32, rej *Rejections) []int32 {
	m, _ := state.Read(a.key).(*selectorMemo)
	kept := ids[:0]
	if m == nil {
		if len(pod.selector) == 0 && len(pod.termEnds) == 0 {
			return ids
		}
		for _, id := range ids {
			if st := a.Filter(ctx, state, pod, &a.g.nodes[id]); st != nil {
				rej.Add(st)
				continue
			}
			kept = append(kept, id)
		}
		return kept
	}
	v := m.verdict
	for _, id := range ids {
		ok := v[id] == 1
		if v[id] == 0 {
			ok = matchesSelector(m.selector, m.reqs, m.termEnds, m.vals, &a.g.cold[id])
			v[id] = 2
			if ok {
				v[id] = 1
			}
		}
		if !ok {
			rej.Add(a.mismatch)
			continue
		}
		kept = append(kept, id)
	}
	return kept
}

func matchesSelector(sel []labelPair, reqs []compiledReq, termEnds []int, vals []int32, n *nodeCold) bool {
	for _, s := range sel {
		if s.key < 0 || s.val < 0 || n.label(s.key) != s.val {
			return false
		}
	}
	if len(termEnds) == 0 {
		return true
	}
	from := 0
	for _, to := range termEnds {
		if termMatches(vals, reqs[from:to], n) {
			return true
		}
		from = to
	}
	return false
}

func termMatches(vals []int32, reqs []compiledReq, n *nodeCold) bool {
	for _, r := range reqs {
		v := int32(-1)
		if r.key >= 0 {
			v = n.label(r.key)
		}
		var ok bool
		switch r.op {
		case SelectorIn:
			ok = v >= 0 && slices.Contains(vals[r.from:r.to], v)
		case SelectorNotIn:
			ok = v < 0 || !slices.Contains(vals[r.from:r.to], v)
		case SelectorExists:
			ok = v >= 0
		case SelectorDoesNotExist:
			ok = v < 0
		}
		if !ok {
			return false
		}
	}
	return true
}
