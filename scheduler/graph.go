package scheduler

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// MaxTopologyLevels bounds the topology keys a graph may use, so each node
// keeps its domain path in a fixed-size array and its hot state fits one
// cache line.
const MaxTopologyLevels = 4

// Well-known node label keys.
const (
	LabelRegion       = "topology.kubernetes.io/region"
	LabelZone         = "topology.kubernetes.io/zone"
	LabelInstanceType = "node.kubernetes.io/instance-type"
)

// Sentinel errors of graph updates.
var (
	ErrNodeExists   = errors.New("node already exists")
	ErrNodeNotFound = errors.New("node not found")
	ErrPodExists    = errors.New("pod already tracked")
	ErrPodNotFound  = errors.New("pod not tracked")
)

// GraphOptions configures a Graph.
type GraphOptions struct {
	// TopologyKeys are node label keys, outermost first (default region,
	// zone). Each key's values form one level of domains.
	TopologyKeys []string
	// NodeTypeKey names the node type label (default instance-type).
	NodeTypeKey string
	// CellKey is the topology key whose domains pair with node types into
	// cells, for baseline matching (default the zone key when present,
	// otherwise the innermost key).
	CellKey string
	// HeatHalfLife is how fast node heat decays (default 5m).
	HeatHalfLife time.Duration
}

// labelPair is one interned node label.
type labelPair struct{ key, val int32 }

// taintRec is one interned node taint.
type taintRec struct {
	key, val int32
	effect   TaintEffect
}

// NodeState is what filters and scores read of one node: the hot part of
// the graph's record, packed into one 64-byte cache line (Graph.nodes is a
// slice of them, in scan order). The rest (name, labels, taints, capacity)
// lives in Graph.cold. Only the graph writes either.
type NodeState struct {
	free  Resources // capacity minus every pod on the node, tracked or not
	heat  float64   // scaled heat, see heat.go
	dom   [MaxTopologyLevels]int32
	cell  int32
	id    int32
	flags uint8
}

// Node flags.
const (
	flagCordoned uint8 = 1 << iota
	flagTainted        // has a NoSchedule or NoExecute taint
)

// nodeCold is the part of a node record the hot path does not read.
type nodeCold struct {
	name     string
	pos      int32 // index in Graph.order
	typ      int32 // node type value ID
	live     bool
	capacity Resources
	base     Resources // allocated by pods the graph does not track
	labels   []labelPair
	taints   []taintRec
}

// ID is the node's index in the graph (stable until nodes are added or
// removed; see Graph.renumber).
func (n *NodeState) ID() int32 { return n.id }

// Free is what the node has left for new pods.
func (n *NodeState) Free() Resources { return n.free }

// label returns the value ID of key on the node, or -1.
func (c *nodeCold) label(key int32) int32 {
	for _, l := range c.labels {
		if l.key == key {
			return l.val
		}
	}
	return -1
}

// Graph is the cluster model. It is not safe for concurrent use: the
// Scheduler serialises access (Scheduler.Update).
type Graph struct {
	opts      GraphOptions
	strs      *interner
	levelKeys []int32 // interned topology keys
	typeKey   int32
	cellLevel int

	nodes  []NodeState
	cold   []nodeCold
	free   []int32
	byName map[string]int32
	live   int

	topology
	counts
	heatClock
}

// NewGraph returns an empty graph.
func NewGraph(opts GraphOptions) (*Graph, error) {
	if len(opts.TopologyKeys) == 0 {
		opts.TopologyKeys = []string{LabelRegion, LabelZone}
	}
	if len(opts.TopologyKeys) > MaxTopologyLevels {
		return nil, fmt.Errorf("graph: %d topology keys, at most %d", len(opts.TopologyKeys), MaxTopologyLevels)
	}
	if opts.NodeTypeKey == "" {
		opts.NodeTypeKey = LabelInstanceType
	}
	if opts.CellKey == "" {
		opts.CellKey = opts.TopologyKeys[len(opts.TopologyKeys)-1]
		if slices.Contains(opts.TopologyKeys, LabelZone) {
			opts.CellKey = LabelZone
		}
	}
	if opts.HeatHalfLife == 0 {
		opts.HeatHalfLife = 5 * time.Minute
	}
	if opts.HeatHalfLife < 0 {
		return nil, fmt.Errorf("graph: negative heat half-life %s", opts.HeatHalfLife)
	}
	g := &Graph{opts: opts, strs: newInterner(), byName: make(map[string]int32)}
	seen := map[string]bool{}
	for _, k := range opts.TopologyKeys {
		if k == "" || seen[k] {
			return nil, fmt.Errorf("graph: topology key %q empty or repeated", k)
		}
		seen[k] = true
		g.levelKeys = append(g.levelKeys, g.strs.intern(k))
	}
	g.cellLevel = slices.Index(opts.TopologyKeys, opts.CellKey)
	if g.cellLevel < 0 {
		return nil, fmt.Errorf("graph: cell key %q is not a topology key", opts.CellKey)
	}
	g.typeKey = g.strs.intern(opts.NodeTypeKey)
	g.topology.init(len(g.levelKeys))
	g.counts.init()
	g.heatClock.init(opts.HeatHalfLife)
	return g, nil
}

// Options returns the options the graph was built with, defaults filled.
func (g *Graph) Options() GraphOptions { return g.opts }

// NumNodes is the number of live nodes.
func (g *Graph) NumNodes() int { return g.live }

// Level returns the level index of a topology key, or -1.
func (g *Graph) Level(key string) int { return slices.Index(g.opts.TopologyKeys, key) }

// NodeName is the name of node id.
func (g *Graph) NodeName(id int32) string { return g.cold[id].name }

// node returns the live node with the given name.
func (g *Graph) node(name string) (*NodeState, bool) {
	id, ok := g.byName[name]
	if !ok {
		return nil, false
	}
	return &g.nodes[id], true
}

// AddNode adds a node; its heat counts from now (see Advance).
func (g *Graph) AddNode(n Node) error {
	if n.Name == "" {
		return errors.New("add node: empty name")
	}
	if _, ok := g.byName[n.Name]; ok {
		return fmt.Errorf("add node %s: %w", n.Name, ErrNodeExists)
	}
	var id int32
	if k := len(g.free); k > 0 {
		id, g.free = g.free[k-1], g.free[:k-1]
	} else {
		id = int32(len(g.nodes))
		g.nodes = append(g.nodes, NodeState{})
		g.cold = append(g.cold, nodeCold{})
	}
	ns, c := &g.nodes[id], &g.cold[id]
	*ns = NodeState{id: id}
	c.name, c.live = n.Name, true
	g.fill(ns, n)
	ns.free = c.capacity.Sub(c.base)
	ns.heat = g.scaleHeat(n.Heat)
	g.byName[n.Name] = id
	g.live++
	g.insertNode(id)
	g.growCounters(len(g.domains), len(g.cells))
	return nil
}

// fill copies the node's labels, taints and resources into the record and
// resolves its type (not yet its domains).
func (g *Graph) fill(ns *NodeState, n Node) {
	c := &g.cold[ns.id]
	c.labels = c.labels[:0]
	for k, v := range n.Labels {
		c.labels = append(c.labels, labelPair{key: g.strs.intern(k), val: g.strs.intern(v)})
	}
	slices.SortFunc(c.labels, func(a, b labelPair) int { return int(a.key - b.key) })
	c.taints = c.taints[:0]
	ns.flags = 0
	for _, t := range n.Taints {
		c.taints = append(c.taints, taintRec{key: g.strs.intern(t.Key), val: g.strs.intern(t.Value), effect: t.Effect})
		if t.Effect != TaintPreferNoSchedule {
			ns.flags |= flagTainted
		}
	}
	if n.Unschedulable {
		ns.flags |= flagCordoned
	}
	c.capacity = n.Capacity
	c.base = n.Allocated
	c.typ = max(c.label(g.typeKey), 0)
}

// topologyValues returns the node's value ID per level ("" when missing).
func (g *Graph) topologyValues(ns *NodeState) (vals [MaxTopologyLevels]int32) {
	for l, k := range g.levelKeys {
		vals[l] = max(g.cold[ns.id].label(k), 0)
	}
	return vals
}

// UpdateNode replaces a node's labels, taints, capacity, untracked
// allocation and heat. Pods the graph tracks on it stay; when its topology
// or type changes, their domain counts move with it.
func (g *Graph) UpdateNode(n Node) error {
	ns, ok := g.node(n.Name)
	if !ok {
		return fmt.Errorf("update node %s: %w", n.Name, ErrNodeNotFound)
	}
	c := &g.cold[ns.id]
	oldVals, oldTyp := g.topologyValues(ns), c.typ
	tracked := c.capacity.Sub(c.base).Sub(ns.free)
	g.fill(ns, n)
	ns.free = c.capacity.Sub(c.base).Sub(tracked)
	ns.heat = g.scaleHeat(n.Heat)
	g.nodeGen++
	if g.topologyValues(ns) == oldVals && c.typ == oldTyp {
		return nil
	}
	g.countNodePods(ns.id, -1)
	g.removeFromTopology(ns.id)
	g.insertNode(ns.id)
	g.growCounters(len(g.domains), len(g.cells))
	g.countNodePods(ns.id, +1)
	return nil
}

// RemoveNode removes a node and forgets the pods tracked on it.
func (g *Graph) RemoveNode(name string) error {
	ns, ok := g.node(name)
	if !ok {
		return fmt.Errorf("remove node %s: %w", name, ErrNodeNotFound)
	}
	id := ns.id
	g.forgetNodePods(id)
	g.removeFromTopology(id)
	delete(g.byName, name)
	g.nodes[id] = NodeState{id: id}
	c := &g.cold[id]
	*c = nodeCold{labels: c.labels[:0], taints: c.taints[:0]}
	g.free = append(g.free, id)
	g.live--
	return nil
}

// NodeSummary is a read-only view of one node for reports and tests.
type NodeSummary struct {
	Name      string
	Capacity  Resources
	Used      Resources
	Heat      float64
	Domains   []string // domain value per topology key
	Type      string
	PodCounts int
}

// Node returns a summary of the named node.
func (g *Graph) Node(name string) (NodeSummary, bool) {
	ns, ok := g.node(name)
	if !ok {
		return NodeSummary{}, false
	}
	c := &g.cold[ns.id]
	s := NodeSummary{Name: c.name, Capacity: c.capacity, Used: c.capacity.Sub(ns.free), Heat: g.effectiveHeat(ns), Type: g.strs.str(c.typ)}
	for l := range g.levelKeys {
		s.Domains = append(s.Domains, g.strs.str(g.domains[ns.dom[l]].value))
	}
	return s, true
}

// NodeNames returns the live node names in topology order.
func (g *Graph) NodeNames() []string {
	out := make([]string, 0, len(g.order))
	for _, id := range g.order {
		out = append(out, g.cold[id].name)
	}
	return out
}

// Advance moves the graph's clock (heat decay) to now. Time never runs
// backwards: an earlier now is ignored.
func (g *Graph) Advance(now time.Time) {
	if g.heatClock.advance(now) {
		for i := range g.nodes {
			g.nodes[i].heat *= g.rebaseFactor
		}
	}
}

func (g *Graph) effectiveHeat(ns *NodeState) float64 {
	if g.scale == 0 || math.IsInf(g.scale, 0) {
		return 0
	}
	return ns.heat / g.scale
}
