package scheduler

import (
	"cmp"
	"context"
	"fmt"
	"slices"
)

// Explanation says, for one pod, why each rejected node was filtered and
// how the best feasible nodes scored. It is computed over every node (no
// sampling) and changes nothing.
type Explanation struct {
	Pod      string `json:"pod"`
	Nodes    int    `json:"nodes"`
	Feasible int    `json:"feasible"`
	// Reasons groups rejections by plugin and reason (a node rejected by
	// two plugins counts under both).
	Reasons  []ReasonCount   `json:"reasons"`
	Filtered []NodeRejection `json:"filtered"`
	// Top are the best TopN feasible nodes, best first (ties by name).
	Top []NodeScore `json:"top"`
}

// NodeRejection is every filter that rejected one node.
type NodeRejection struct {
	Node     string      `json:"node"`
	Failures []Rejection `json:"failures"`
}

// Rejection is one filter's verdict on a node.
type Rejection struct {
	Plugin string `json:"plugin"`
	Reason string `json:"reason"`
	Detail string `json:"detail,omitempty"`
}

// NodeScore is one node's weighted total and per-plugin breakdown.
type NodeScore struct {
	Node   string        `json:"node"`
	Total  int64         `json:"total"`
	Scores []PluginScore `json:"scores"`
}

// PluginScore is one score plugin's contribution to a node's total.
type PluginScore struct {
	Plugin     string `json:"plugin"`
	Raw        int64  `json:"raw"`
	Normalized int64  `json:"normalized"`
	Weight     int64  `json:"weight"`
}

// Explain reports how pod would be scheduled now: every filter on every
// node, and the topN best scores.
func (s *Scheduler) Explain(ctx context.Context, pod *Pod, topN int) (*Explanation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.g.Advance(s.opts.Clock())
	s.g.scanOrder()
	pi := &s.pi
	s.g.compile(pi, pod)
	ex := &Explanation{Pod: pod.Name, Nodes: s.g.live}
	for _, p := range s.fw.preFilter {
		if st := p.PreFilter(ctx, &s.state, pi); st != nil {
			if !st.IsRejected() {
				return nil, fmt.Errorf("explain %s: prefilter %s: %w", pod.Name, p.Name(), st.AsError())
			}
			ex.Reasons = []ReasonCount{{Plugin: p.Name(), Reason: st.Reason(), Count: s.g.live}}
			return ex, nil
		}
	}
	var feasible []int32
	for _, id := range s.g.order {
		ns := &s.g.nodes[id]
		var rej NodeRejection
		for _, p := range s.fw.filter {
			st := p.Filter(ctx, &s.state, pi, ns)
			if st == nil {
				continue
			}
			if st.Code() == Error {
				return nil, fmt.Errorf("explain %s: filter %s on %s: %w", pod.Name, p.Name(), s.g.cold[id].name, st.AsError())
			}
			r := Rejection{Plugin: p.Name(), Reason: st.Reason()}
			if x, ok := p.(FilterExplainer); ok {
				r.Detail = x.ExplainFilter(&s.state, pi, ns)
			}
			rej.Failures = append(rej.Failures, r)
			i := slices.IndexFunc(ex.Reasons, func(c ReasonCount) bool { return c.Plugin == r.Plugin && c.Reason == r.Reason })
			if i < 0 {
				ex.Reasons = append(ex.Reasons, ReasonCount{Plugin: r.Plugin, Reason: r.Reason})
				i = len(ex.Reasons) - 1
			}
			ex.Reasons[i].Count++
		}
		if rej.Failures == nil {
			feasible = append(feasible, id)
			continue
		}
		rej.Node = s.g.cold[id].name
		ex.Filtered = append(ex.Filtered, rej)
	}
	slices.SortStableFunc(ex.Reasons, func(a, b ReasonCount) int { return b.Count - a.Count })
	ex.Feasible = len(feasible)
	if len(feasible) == 0 {
		return ex, nil
	}
	top, err := s.explainScores(ctx, pi, feasible)
	if err != nil {
		return nil, fmt.Errorf("explain %s: %w", pod.Name, err)
	}
	ex.Top = top[:min(topN, len(top))]
	return ex, nil
}

// explainScores scores every feasible node sequentially, keeping raw and
// normalised values per plugin.
func (s *Scheduler) explainScores(ctx context.Context, pi *PodInfo, feasible []int32) ([]NodeScore, error) {
	if st := s.prepareScores(ctx, pi, feasible); st != nil {
		return nil, st.AsError()
	}
	out := make([]NodeScore, len(feasible))
	for i, id := range feasible {
		out[i].Node = s.g.cold[id].name
	}
	for _, k := range s.active {
		sp := s.fw.score[k]
		sc := s.scores[k]
		for i, id := range feasible {
			v, st := sp.p.Score(ctx, &s.state, pi, &s.g.nodes[id])
			if st != nil {
				return nil, fmt.Errorf("score %s: %w", sp.p.Name(), st.AsError())
			}
			sc[i] = v
			out[i].Scores = append(out[i].Scores, PluginScore{Plugin: sp.p.Name(), Raw: v, Weight: sp.weight})
		}
	}
	s.cyc.scan = feasible
	if st := s.normalize(ctx, pi); st != nil {
		return nil, st.AsError()
	}
	for j, k := range s.active {
		for i := range feasible {
			out[i].Scores[j].Normalized = s.scores[k][i]
		}
	}
	for i := range out {
		out[i].Total = s.total[i]
	}
	slices.SortStableFunc(out, func(a, b NodeScore) int {
		if a.Total != b.Total {
			return cmp.Compare(b.Total, a.Total)
		}
		return cmp.Compare(a.Node, b.Node)
	})
	return out, nil
}
