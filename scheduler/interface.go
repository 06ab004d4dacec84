package scheduler

import "context"

// MaxNodeScore is the top of the normalised score range, as in
// kube-scheduler: after NormalizeScore every score is in [0, 100].
const MaxNodeScore int64 = 100

// Plugin is the base of every plugin: a unique name.
type Plugin interface {
	Name() string
}

// PreFilterPlugin runs once per pod before filtering, typically to compute
// per-pod state into the CycleState. A rejection makes the pod
// unschedulable without looking at nodes.
type PreFilterPlugin interface {
	Plugin
	PreFilter(ctx context.Context, state *CycleState, pod *PodInfo) *Status
}

// FilterPlugin decides whether a pod may run on a node. It is called
// concurrently for different nodes and must not write shared state; it
// returns nil to accept and a shared, pre-built Status to reject.
type FilterPlugin interface {
	Plugin
	Filter(ctx context.Context, state *CycleState, pod *PodInfo, node *NodeState) *Status
}

// BatchFilterPlugin is optional for filter plugins: FilterNodes checks many
// nodes (by ID) in one call, moves the ones that pass to the front of nodes
// (keeping their order) and returns that prefix; every other node's
// rejection goes to rej. One pass, no interface call per node. It must
// agree with Filter.
type BatchFilterPlugin interface {
	FilterPlugin
	FilterNodes(ctx context.Context, state *CycleState, pod *PodInfo, nodes []int32, rej *Rejections) []int32
}

// Rejections counts a batch filter's rejections by status. It does not
// allocate once warm: plugins pass their shared, pre-built statuses.
type Rejections struct {
	t   *tally
	err *Status
}

// Add records one rejected node.
func (r *Rejections) Add(st *Status) {
	if st.Code() == Error {
		if r.err == nil {
			r.err = st
		}
		return
	}
	r.t.add(st)
}

// DomainFilterPlugin is optional for filter plugins whose verdict on a node
// depends only on the node's domain at one topology level (for example
// failure-domain isolation). After PreFilter the cycle asks for one verdict
// per domain and skips the nodes of rejected domains without touching them;
// Filter still runs on the other nodes and in Explain.
type DomainFilterPlugin interface {
	FilterPlugin
	// FilterDomains returns the level and, indexed by domain ID, nil for
	// allowed domains and the rejection otherwise; level -1 means no
	// verdict this cycle.
	FilterDomains(ctx context.Context, state *CycleState, pod *PodInfo) (level int, verdicts []*Status)
}

// PostFilterPlugin runs when no node passed the filters (kube-scheduler
// uses this point for preemption). diag says why nodes were rejected.
type PostFilterPlugin interface {
	Plugin
	PostFilter(ctx context.Context, state *CycleState, pod *PodInfo, diag *Diagnosis) *Status
}

// PreScorePlugin runs once per pod before scoring, with the feasible nodes.
// Returning a Skip status skips this plugin's Score for the pod.
type PreScorePlugin interface {
	Plugin
	PreScore(ctx context.Context, state *CycleState, pod *PodInfo, nodes []int32) *Status
}

// ScorePlugin ranks feasible nodes. Score is called concurrently for
// different nodes; raw scores may use any range and are brought into
// [0, MaxNodeScore] by ScoreExtensions.NormalizeScore.
type ScorePlugin interface {
	Plugin
	Score(ctx context.Context, state *CycleState, pod *PodInfo, node *NodeState) (int64, *Status)
	// ScoreExtensions returns nil when raw scores are already in range.
	ScoreExtensions() ScoreExtensions
}

// BatchScorePlugin is optional for score plugins: ScoreNodes scores many
// nodes (by ID) in one call, which saves an interface call and a state
// lookup per node on the hot path. It must give exactly what Score gives
// (Explain uses Score, and a test compares the two).
type BatchScorePlugin interface {
	ScorePlugin
	ScoreNodes(ctx context.Context, state *CycleState, pod *PodInfo, nodes []int32, scores []int64) *Status
}

// ScoreExtensions normalises one plugin's scores in place; scores[i]
// belongs to the i-th feasible node.
type ScoreExtensions interface {
	NormalizeScore(ctx context.Context, state *CycleState, pod *PodInfo, scores []int64) *Status
}

// ReservePlugin is told when a node is reserved for a pod (after the graph
// has assumed the placement) and, if a later step fails, un-reserved.
type ReservePlugin interface {
	Plugin
	Reserve(ctx context.Context, state *CycleState, pod *PodInfo, node *NodeState) *Status
	Unreserve(ctx context.Context, state *CycleState, pod *PodInfo, node *NodeState)
}

// BindPlugin makes the placement real (in Kubernetes mode, a Binding).
// The first bind plugin that does not return Skip decides. With no bind
// plugins the graph's assumed placement is the result (planning mode).
type BindPlugin interface {
	Plugin
	Bind(ctx context.Context, state *CycleState, pod *PodInfo, node *NodeState) *Status
}

// StateKey addresses one plugin's slot in a CycleState.
type StateKey int

// CycleState carries per-pod data from a plugin's PreFilter or PreScore to
// its Filter and Score calls. Slots are indexed by StateKey (handed out by
// Handle.StateKey at construction) rather than by string, and the state is
// reused across cycles, so plugins can keep their state objects and avoid
// allocating per pod. Reads during Filter/Score are concurrent; writes
// happen only in the single-threaded Pre* steps.
type CycleState struct {
	slots []any
}

// Read returns the data in slot k (nil when unset).
func (c *CycleState) Read(k StateKey) any {
	if int(k) >= len(c.slots) {
		return nil
	}
	return c.slots[k]
}

// Write stores data in slot k.
func (c *CycleState) Write(k StateKey, v any) {
	for int(k) >= len(c.slots) {
		c.slots = append(c.slots, nil)
	}
	c.slots[k] = v
}

// Handle is what plugins get from the framework at construction.
type Handle interface {
	// Graph is the cluster model. Plugins read it during a cycle, when the
	// scheduler holds its lock.
	Graph() *Graph
	// StateKey hands out a CycleState slot.
	StateKey() StateKey
}

// PluginFactory builds a plugin from its typed args (nil means defaults).
type PluginFactory func(args any, h Handle) (Plugin, error)

// Registry maps plugin names to factories. It is a value passed in
// Options, never a package-level map.
type Registry map[string]PluginFactory

// PluginConfig enables one plugin in a profile.
type PluginConfig struct {
	Name string
	// Weight multiplies the plugin's normalised score (score plugins only;
	// 0 means 1).
	Weight int64
	// Args are the plugin's typed arguments, e.g. *FailureDomainArgs.
	Args any
}
