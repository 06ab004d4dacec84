package scheduler

import (
	"context"
	"fmt"
)

// TaintTolerationName is the name of the taints/tolerations filter.
const TaintTolerationName = "TaintToleration"

// TaintToleration rejects cordoned nodes and nodes with a NoSchedule or
// NoExecute taint the pod does not tolerate (PreferNoSchedule is ignored).
type TaintToleration struct {
	untolerated, cordoned *Status
	g                     *Graph
}

var (
	_ FilterPlugin      = &TaintToleration{}
	_ BatchFilterPlugin = &TaintToleration{}
	_ FilterExplainer   = &TaintToleration{}
)

// NewTaintToleration builds the filter. It takes no args.
func NewTaintToleration(args any, h Handle) (Plugin, error) {
	if args != nil {
		return nil, fmt.Errorf("%s: unexpected args %T", TaintTolerationName, args)
	}
	return &TaintToleration{
		untolerated: NewStatus(UnschedulableAndUnresolvable, "node(s) had untolerated taint").WithPlugin(TaintTolerationName),
		cordoned:    NewStatus(UnschedulableAndUnresolvable, "node(s) were unschedulable").WithPlugin(TaintTolerationName),
		g:           h.Graph(),
	}, nil
}

// Name implements Plugin.
func (t *TaintToleration) Name() string { return TaintTolerationName }

// Filter implements FilterPlugin.
func (t *TaintToleration) Filter(_ context.Context, _ *CycleState, pod *PodInfo, n *NodeState) *Status {
	if n.flags == 0 {
		return nil
	}
	if n.flags&flagCordoned != 0 {
		return t.cordoned
	}
	if _, ok := untolerated(pod, &t.g.cold[n.id]); ok {
		return t.untolerated
	}
	return nil
}

// FilterNodes implements BatchFilterPlugin.
func (t *TaintToleration) FilterNodes(ctx context.Context, state *CycleState, pod *PodInfo, ids []int32, rej *Rejections) []int32 {
	nodes, kept := t.g.nodes, ids[:0]
	for _, id := range ids {
		if nodes[id].flags != 0 {
			if st := t.Filter(ctx, state, pod, &nodes[id]); st != nil {
				rej.Add(st)
				continue
			}
		}
		kept = append(kept, id)
	}
	return kept
}

// ExplainFilter implements FilterExplainer: it names the taint.
func (t *TaintToleration) ExplainFilter(_ *CycleState, pod *PodInfo, n *NodeState) string {
	if n.flags&flagCordoned != 0 {
		return "node is cordoned"
	}
	if tr, ok := untolerated(pod, &t.g.cold[n.id]); ok {
		return fmt.Sprintf("taint %s=%s:%s", t.g.strs.str(tr.key), t.g.strs.str(tr.val), tr.effect)
	}
	return ""
}

// untolerated returns the first scheduling taint of n that pod does not
// tolerate.
func untolerated(pod *PodInfo, n *nodeCold) (taintRec, bool) {
	for _, tr := range n.taints {
		if tr.effect == TaintPreferNoSchedule {
			continue
		}
		if !tolerated(pod.tols, tr) {
			return tr, true
		}
	}
	return taintRec{}, false
}

func tolerated(tols []compiledTol, tr taintRec) bool {
	for _, t := range tols {
		if t.effect != "" && t.effect != tr.effect {
			continue
		}
		if t.key == 0 && t.exists {
			return true
		}
		if t.key != tr.key {
			continue
		}
		if t.exists || t.val == tr.val {
			return true
		}
	}
	return false
}
