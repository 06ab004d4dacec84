package scheduler

// skipStatus is returned by PreScore plugins that have nothing to score.
var skipStatus = NewStatus(Skip, "nothing to score")

// FilterExplainer is optional for filter plugins: it describes in detail
// why a node was rejected (which taint, how much CPU was free), for
// Explain. It may allocate; Filter must not.
type FilterExplainer interface {
	ExplainFilter(state *CycleState, pod *PodInfo, node *NodeState) string
}

// NewInTreeRegistry returns the factories of every built-in plugin.
func NewInTreeRegistry() Registry {
	return Registry{
		NodeResourcesFitName:   NewFit,
		TaintTolerationName:    NewTaintToleration,
		NodeAffinityName:       NewNodeAffinity,
		FailureDomainName:      NewFailureDomain,
		LeastHeatName:          NewLeastHeat,
		DependencyAffinityName: NewDependencyAffinity,
		TopologySpreadName:     NewTopologySpread,
		BaselineMatchName:      NewBaselineMatch,
	}
}

// DefaultPlugins enables every built-in plugin with default args. Filters
// run in kube-scheduler's order (taints, affinity, then resources), so a
// node is reported for the most permanent reason it fails. The weights favour the placement goals over heat: baseline matching and
// dependency affinity 2, spread and heat 1.
func DefaultPlugins() []PluginConfig {
	return []PluginConfig{
		{Name: TaintTolerationName},
		{Name: NodeAffinityName},
		{Name: NodeResourcesFitName},
		{Name: FailureDomainName},
		{Name: LeastHeatName, Weight: 1},
		{Name: DependencyAffinityName, Weight: 2},
		{Name: TopologySpreadName, Weight: 1},
		{Name: BaselineMatchName, Weight: 2},
	}
}
