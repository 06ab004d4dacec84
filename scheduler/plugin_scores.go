package scheduler

import (
	"context"
	"fmt"
)

// Score plugin names.
const (
	LeastHeatName          = "LeastHeat"
	DependencyAffinityName = "DependencyAffinity"
	TopologySpreadName     = "TopologySpread"
	BaselineMatchName      = "BaselineMatch"
)

// LeastHeat prefers cool nodes: raw score is the node's decayed heat in
// millionths, normalised so the coolest feasible node gets 100 and the
// hottest 0. How fast heat decays is GraphOptions.HeatHalfLife; placing a
// pod adds its share of the node's CPU.
type LeastHeat struct{ g *Graph }

var (
	_ ScorePlugin      = &LeastHeat{}
	_ BatchScorePlugin = &LeastHeat{}
	_ ScoreExtensions  = &LeastHeat{}
)

// NewLeastHeat builds the plugin. It takes no args.
func NewLeastHeat(args any, h Handle) (Plugin, error) {
	if args != nil {
		return nil, fmt.Errorf("%s: unexpected args %T", LeastHeatName, args)
	}
	return &LeastHeat{g: h.Graph()}, nil
}

// Name implements Plugin.
func (p *LeastHeat) Name() string { return LeastHeatName }

// Score implements ScorePlugin.
func (p *LeastHeat) Score(_ context.Context, _ *CycleState, _ *PodInfo, n *NodeState) (int64, *Status) {
	return int64(n.heat * (1e6 / p.g.scale)), nil
}

// ScoreNodes implements BatchScorePlugin.
func (p *LeastHeat) ScoreNodes(_ context.Context, _ *CycleState, _ *PodInfo, ids []int32, out []int64) *Status {
	inv := 1e6 / p.g.scale
	for i, id := range ids {
		out[i] = int64(p.g.nodes[id].heat * inv)
	}
	return nil
}

// ScoreExtensions implements ScorePlugin.
func (p *LeastHeat) ScoreExtensions() ScoreExtensions { return p }

// NormalizeScore implements ScoreExtensions: lower heat, higher score.
func (p *LeastHeat) NormalizeScore(_ context.Context, _ *CycleState, _ *PodInfo, scores []int64) *Status {
	normalizeReverse(scores)
	return nil
}

// normalizeReverse maps the smallest raw score to 100 and the largest to 0
// (all 100 when equal). It multiplies by a precomputed factor instead of
// dividing per node: an integer division per node per plugin was a tenth
// of a cycle's time.
func normalizeReverse(scores []int64) {
	lo, hi := minMax(scores)
	if hi == lo {
		for i := range scores {
			scores[i] = MaxNodeScore
		}
		return
	}
	f := float64(MaxNodeScore) / float64(hi-lo)
	for i, s := range scores {
		scores[i] = int64(float64(hi-s) * f)
	}
}

// normalizeMax maps raw scores to [0,100] proportionally to the largest
// (all 0 when the largest is 0).
func normalizeMax(scores []int64) {
	_, hi := minMax(scores)
	if hi <= 0 {
		clear(scores)
		return
	}
	f := float64(MaxNodeScore) / float64(hi)
	for i, s := range scores {
		scores[i] = int64(float64(s) * f)
	}
}

func minMax(scores []int64) (lo, hi int64) {
	if len(scores) == 0 {
		return 0, 0
	}
	lo, hi = scores[0], scores[0]
	for _, s := range scores[1:] {
		lo, hi = min(lo, s), max(hi, s)
	}
	return lo, hi
}

// WeightedKey is a topology key with a weight.
type WeightedKey struct {
	Key    string
	Weight int64
}

// DependencyAffinityArgs configures dependency affinity.
type DependencyAffinityArgs struct {
	// Keys say how much sharing each domain with a dependency's pods is
	// worth (default: innermost key 2, the one above it 1).
	Keys []WeightedKey
}

// DependencyAffinity prefers nodes in the same domains (rack, zone) as pods
// of the services the pod depends on.
type DependencyAffinity struct {
	g       *Graph
	levels  []int
	weights []int64
}

var (
	_ PreScorePlugin   = &DependencyAffinity{}
	_ ScorePlugin      = &DependencyAffinity{}
	_ BatchScorePlugin = &DependencyAffinity{}
	_ ScoreExtensions  = &DependencyAffinity{}
)

// NewDependencyAffinity builds the plugin from *DependencyAffinityArgs.
func NewDependencyAffinity(args any, h Handle) (Plugin, error) {
	g := h.Graph()
	var a DependencyAffinityArgs
	switch v := args.(type) {
	case nil:
	case *DependencyAffinityArgs:
		a = *v
	default:
		return nil, fmt.Errorf("%s: args %T, want *DependencyAffinityArgs", DependencyAffinityName, args)
	}
	if len(a.Keys) == 0 {
		keys := g.opts.TopologyKeys
		a.Keys = []WeightedKey{{Key: keys[len(keys)-1], Weight: 2}}
		if len(keys) > 1 {
			a.Keys = append(a.Keys, WeightedKey{Key: keys[len(keys)-2], Weight: 1})
		}
	}
	p := &DependencyAffinity{g: g}
	for _, k := range a.Keys {
		l := g.Level(k.Key)
		if l < 0 {
			return nil, fmt.Errorf("%s: topology key %q is not one of the graph's %v", DependencyAffinityName, k.Key, g.opts.TopologyKeys)
		}
		if k.Weight <= 0 {
			return nil, fmt.Errorf("%s: weight %d of %s must be positive", DependencyAffinityName, k.Weight, k.Key)
		}
		p.levels = append(p.levels, l)
		p.weights = append(p.weights, k.Weight)
	}
	return p, nil
}

// Name implements Plugin.
func (p *DependencyAffinity) Name() string { return DependencyAffinityName }

// PreScore implements PreScorePlugin: pods without dependencies skip.
func (p *DependencyAffinity) PreScore(_ context.Context, _ *CycleState, pod *PodInfo, _ []int32) *Status {
	if len(pod.deps) == 0 {
		return skipStatus
	}
	return nil
}

// Score implements ScorePlugin.
func (p *DependencyAffinity) Score(_ context.Context, _ *CycleState, pod *PodInfo, n *NodeState) (int64, *Status) {
	var s int64
	for _, dep := range pod.deps {
		c := p.g.counters[dep].dom
		for i, l := range p.levels {
			if c[n.dom[l]] > 0 {
				s += p.weights[i]
			}
		}
	}
	return s, nil
}

// ScoreNodes implements BatchScorePlugin: one pass per dependency and
// level, with the counter slice and level hoisted out of the node loop.
func (p *DependencyAffinity) ScoreNodes(_ context.Context, _ *CycleState, pod *PodInfo, ids []int32, out []int64) *Status {
	clear(out)
	nodes := p.g.nodes
	for _, dep := range pod.deps {
		c := p.g.counters[dep].dom
		for li, l := range p.levels {
			w := p.weights[li]
			for i, id := range ids {
				if c[nodes[id].dom[l]] > 0 {
					out[i] += w
				}
			}
		}
	}
	return nil
}

// ScoreExtensions implements ScorePlugin.
func (p *DependencyAffinity) ScoreExtensions() ScoreExtensions { return p }

// NormalizeScore implements ScoreExtensions.
func (p *DependencyAffinity) NormalizeScore(_ context.Context, _ *CycleState, _ *PodInfo, scores []int64) *Status {
	normalizeMax(scores)
	return nil
}

// TopologySpreadArgs configures the spread score.
type TopologySpreadArgs struct {
	// TopologyKey is spread over (default the innermost graph key).
	TopologyKey string
}

// TopologySpread prefers domains holding fewer pods of the pod's group.
type TopologySpread struct {
	g     *Graph
	level int
}

var (
	_ PreScorePlugin   = &TopologySpread{}
	_ ScorePlugin      = &TopologySpread{}
	_ BatchScorePlugin = &TopologySpread{}
	_ ScoreExtensions  = &TopologySpread{}
)

// NewTopologySpread builds the plugin from *TopologySpreadArgs.
func NewTopologySpread(args any, h Handle) (Plugin, error) {
	g := h.Graph()
	var a TopologySpreadArgs
	switch v := args.(type) {
	case nil:
	case *TopologySpreadArgs:
		a = *v
	default:
		return nil, fmt.Errorf("%s: args %T, want *TopologySpreadArgs", TopologySpreadName, args)
	}
	if a.TopologyKey == "" {
		a.TopologyKey = g.opts.TopologyKeys[len(g.opts.TopologyKeys)-1]
	}
	l := g.Level(a.TopologyKey)
	if l < 0 {
		return nil, fmt.Errorf("%s: topology key %q is not one of the graph's %v", TopologySpreadName, a.TopologyKey, g.opts.TopologyKeys)
	}
	return &TopologySpread{g: g, level: l}, nil
}

// Name implements Plugin.
func (p *TopologySpread) Name() string { return TopologySpreadName }

// PreScore implements PreScorePlugin: pods in no group skip.
func (p *TopologySpread) PreScore(_ context.Context, _ *CycleState, pod *PodInfo, _ []int32) *Status {
	if pod.group < 0 {
		return skipStatus
	}
	return nil
}

// Score implements ScorePlugin.
func (p *TopologySpread) Score(_ context.Context, _ *CycleState, pod *PodInfo, n *NodeState) (int64, *Status) {
	return int64(p.g.counters[pod.group].dom[n.dom[p.level]]), nil
}

// ScoreNodes implements BatchScorePlugin.
func (p *TopologySpread) ScoreNodes(_ context.Context, _ *CycleState, pod *PodInfo, ids []int32, out []int64) *Status {
	c := p.g.counters[pod.group].dom
	for i, id := range ids {
		out[i] = int64(c[p.g.nodes[id].dom[p.level]])
	}
	return nil
}

// ScoreExtensions implements ScorePlugin.
func (p *TopologySpread) ScoreExtensions() ScoreExtensions { return p }

// NormalizeScore implements ScoreExtensions: fewer pods, higher score.
func (p *TopologySpread) NormalizeScore(_ context.Context, _ *CycleState, _ *PodInfo, scores []int64) *Status {
	normalizeReverse(scores)
	return nil
}

// BaselineMatch places baseline pods like their canary: a node scores 100
// when its cell (zone, node type) has more canary than baseline pods,
// 66 when the cell has canary pods at all, 33 when only its zone has an
// unmatched canary pod, else 0. Cells use GraphOptions.CellKey and
// NodeTypeKey. As a filter it keeps baseline pods in the canary's zones
// (plugin_baseline.go).
type BaselineMatch struct {
	g         *Graph
	otherZone *Status
}

var (
	_ PreScorePlugin   = &BaselineMatch{}
	_ ScorePlugin      = &BaselineMatch{}
	_ BatchScorePlugin = &BaselineMatch{}
)

// NewBaselineMatch builds the plugin. It takes no args.
func NewBaselineMatch(args any, h Handle) (Plugin, error) {
	if args != nil {
		return nil, fmt.Errorf("%s: unexpected args %T", BaselineMatchName, args)
	}
	return newBaselineMatch(h.Graph()), nil
}

// Name implements Plugin.
func (p *BaselineMatch) Name() string { return BaselineMatchName }

// PreScore implements PreScorePlugin: only baseline pods with a canary
// group to match are scored.
func (p *BaselineMatch) PreScore(_ context.Context, _ *CycleState, pod *PodInfo, _ []int32) *Status {
	if pod.Pod.Role != RoleBaseline || pod.matchGroup < 0 || pod.group < 0 {
		return skipStatus
	}
	return nil
}

// Score implements ScorePlugin; scores are already in [0,100].
func (p *BaselineMatch) Score(_ context.Context, _ *CycleState, pod *PodInfo, n *NodeState) (int64, *Status) {
	canary, baseline := &p.g.counters[pod.matchGroup], &p.g.counters[pod.group]
	switch zone := n.dom[p.g.cellLevel]; {
	case canary.cell[n.cell] > baseline.cell[n.cell]:
		return 100, nil
	case canary.cell[n.cell] > 0:
		return 66, nil
	case canary.dom[zone] > baseline.dom[zone]:
		return 33, nil
	}
	return 0, nil
}

// ScoreNodes implements BatchScorePlugin.
func (p *BaselineMatch) ScoreNodes(ctx context.Context, state *CycleState, pod *PodInfo, ids []int32, out []int64) *Status {
	for i, id := range ids {
		out[i], _ = p.Score(ctx, state, pod, &p.g.nodes[id])
	}
	return nil
}

// ScoreExtensions implements ScorePlugin.
func (p *BaselineMatch) ScoreExtensions() ScoreExtensions { return nil }
