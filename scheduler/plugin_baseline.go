package scheduler

import "context"

// This file is BaselineMatch's filter: a baseline pod goes only where its
// canary runs, so that the judge compares pods that share failure domains
// (and the neighbours, network paths and zone-local dependencies that come
// with them). The score (plugin_scores.go) then prefers the cells with
// unmatched canary pods.

var (
	_ FilterPlugin    = &BaselineMatch{}
	_ FilterExplainer = &BaselineMatch{}
)

func newBaselineMatch(g *Graph) *BaselineMatch {
	return &BaselineMatch{
		g: g,
		// Unschedulable, not unresolvable: placing a canary pod there
		// resolves it.
		otherZone: NewStatus(Unschedulable, "node(s) in a zone without the canary's pods").WithPlugin(BaselineMatchName),
	}
}

// Filter implements FilterPlugin: a baseline pod (RoleBaseline with a
// MatchGroup) may go only to a zone (the graph's cell key) where its
// canary has pods. While the canary has none placed there is nothing to
// mirror and the pod passes (the Kubernetes binder places the canary's
// pending pods first). Other pods pass.
func (p *BaselineMatch) Filter(_ context.Context, _ *CycleState, pod *PodInfo, n *NodeState) *Status {
	if pod.Pod.Role != RoleBaseline || pod.matchGroup < 0 {
		return nil
	}
	canary := &p.g.counters[pod.matchGroup]
	if canary.total == 0 {
		return nil
	}
	if zone := n.dom[p.g.cellLevel]; zone < 0 || int(zone) >= len(canary.dom) || canary.dom[zone] == 0 {
		return p.otherZone
	}
	return nil
}

// ExplainFilter implements FilterExplainer.
func (p *BaselineMatch) ExplainFilter(_ *CycleState, pod *PodInfo, n *NodeState) string {
	if s := p.Filter(context.Background(), nil, pod, n); s != nil {
		return s.Reason()
	}
	return "in a zone of the canary's pods"
}
