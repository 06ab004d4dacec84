package scheduler

import "slices"

// PodInfo is a pod compiled against the graph: names become interned IDs
// and counter indexes, so filters compare integers. The scheduler reuses one
// PodInfo across cycles, which keeps compiling allocation-free once its
// slices have grown.
type PodInfo struct {
	Pod *Pod
	// Requests include one pod slot.
	Requests   Resources
	group      int32 // counter IDs, -1 when none
	service    int32
	matchGroup int32
	deps       []int32
	selector   []labelPair // val -1: no node has that value
	reqs       []compiledReq
	termEnds   []int // reqs[termEnds[i-1]:termEnds[i]] is term i
	vals       []int32
	tols       []compiledTol
}

type compiledReq struct {
	key      int32
	op       SelectorOperator
	from, to int // vals[from:to]
}

type compiledTol struct {
	key    int32 // 0: any key (with Exists); -1: a key no node has
	exists bool
	val    int32
	effect TaintEffect
}

// Group is the pod's group counter ID (-1 when none).
func (p *PodInfo) Group() int32 { return p.group }

// compile fills pi from pod.
func (g *Graph) compile(pi *PodInfo, pod *Pod) {
	pi.Pod = pod
	pi.Requests = pod.Requests
	pi.Requests.Pods = 1
	pi.group = g.ensureCounter(pod.Group)
	pi.service = g.ensureCounter(pod.Service)
	pi.matchGroup = g.ensureCounter(pod.MatchGroup)
	pi.deps = pi.deps[:0]
	for _, d := range pod.Dependencies {
		pi.deps = append(pi.deps, g.ensureCounter(d))
	}
	pi.selector = pi.selector[:0]
	for k, v := range pod.NodeSelector {
		pi.selector = append(pi.selector, labelPair{key: g.strs.lookup(k), val: g.strs.lookup(v)})
	}
	// Map order is random; sorted, equal selectors compile identically.
	slices.SortFunc(pi.selector, func(a, b labelPair) int {
		if a.key != b.key {
			return int(a.key - b.key)
		}
		return int(a.val - b.val)
	})
	pi.reqs, pi.termEnds, pi.vals = pi.reqs[:0], pi.termEnds[:0], pi.vals[:0]
	for _, t := range pod.RequiredAffinity {
		for _, r := range t.MatchExpressions {
			c := compiledReq{key: g.strs.lookup(r.Key), op: r.Operator, from: len(pi.vals)}
			for _, v := range r.Values {
				pi.vals = append(pi.vals, g.strs.lookup(v))
			}
			c.to = len(pi.vals)
			pi.reqs = append(pi.reqs, c)
		}
		pi.termEnds = append(pi.termEnds, len(pi.reqs))
	}
	pi.tols = pi.tols[:0]
	for _, t := range pod.Tolerations {
		c := compiledTol{key: g.strs.lookup(t.Key), exists: t.Operator == TolerationExists, val: g.strs.lookup(t.Value), effect: t.Effect}
		pi.tols = append(pi.tols, c)
	}
}
