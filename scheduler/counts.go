package scheduler

import (
	"errors"
	"fmt"
	"slices"
)

// counts tracks pods the graph knows about and, per group or service name,
// how many of them sit in each domain and each cell. Counters are dense
// slices indexed by domain and cell ID, so plugins read them with one index
// operation per node.
type counts struct {
	counterIdx map[string]int32
	counterNm  []string
	counters   []counter
	pods       map[string]int32
	podRecs    []podRec
	podFree    []int32
}

type counter struct {
	dom   []int32
	cell  []int32
	total int32
}

type podRec struct {
	name     string
	node     int32
	group    int32
	service  int32
	req      Resources
	heatAdd  float64 // stored (scaled) heat added at placement
	occupied bool
}

func (c *counts) init() {
	c.counterIdx = make(map[string]int32)
	c.pods = make(map[string]int32)
}

// counterID returns the counter of name, or -1 when none exists.
func (c *counts) counterID(name string) int32 {
	if name == "" {
		return -1
	}
	if id, ok := c.counterIdx[name]; ok {
		return id
	}
	return -1
}

// ensureCounter returns the counter of name, creating it (-1 for "").
func (g *Graph) ensureCounter(name string) int32 {
	if name == "" {
		return -1
	}
	if id, ok := g.counterIdx[name]; ok {
		return id
	}
	id := int32(len(g.counters))
	g.counterIdx[name] = id
	g.counterNm = append(g.counterNm, name)
	g.counters = append(g.counters, counter{dom: make([]int32, len(g.domains)), cell: make([]int32, len(g.cells))})
	return id
}

// growCounters extends every counter to nd domains and nc cells.
func (c *counts) growCounters(nd, nc int) {
	for i := range c.counters {
		k := &c.counters[i]
		for len(k.dom) < nd {
			k.dom = append(k.dom, 0)
		}
		for len(k.cell) < nc {
			k.cell = append(k.cell, 0)
		}
	}
}

// bump adds delta to counter id for node ns's domains and cell.
func (g *Graph) bump(id int32, ns *NodeState, delta int32) {
	if id < 0 {
		return
	}
	k := &g.counters[id]
	for _, d := range ns.dom[:g.levels] {
		k.dom[d] += delta
	}
	k.cell[ns.cell] += delta
	k.total += delta
}

// AddPod records a pod already running on node (for example a dependency's
// or a critical service's pod), so domain counts and resources include it.
// It adds no heat: the node's reported heat already covers running pods.
func (g *Graph) AddPod(p *Pod, node string) error {
	ns, ok := g.node(node)
	if !ok {
		return fmt.Errorf("add pod %s: node %s: %w", p.Name, node, ErrNodeNotFound)
	}
	_, err := g.track(p.Name, g.ensureCounter(p.Group), g.ensureCounter(p.Service), p.Requests, ns, 0)
	return err
}

// track records a placement of a named pod on ns.
func (g *Graph) track(name string, group, service int32, req Resources, ns *NodeState, heat float64) (int32, error) {
	if name == "" {
		return -1, errors.New("track pod: empty name")
	}
	if _, dup := g.pods[name]; dup {
		return -1, fmt.Errorf("track pod %s: %w", name, ErrPodExists)
	}
	var r int32
	if k := len(g.podFree); k > 0 {
		r, g.podFree = g.podFree[k-1], g.podFree[:k-1]
	} else {
		r = int32(len(g.podRecs))
		g.podRecs = append(g.podRecs, podRec{})
	}
	req.Pods = 1
	g.podRecs[r] = podRec{name: name, node: ns.id, group: group, service: service, req: req, heatAdd: heat, occupied: true}
	g.pods[name] = r
	ns.free = ns.free.Sub(req)
	ns.heat += heat
	g.bump(group, ns, 1)
	if service != group {
		g.bump(service, ns, 1)
	}
	return r, nil
}

// RemovePod forgets a tracked pod and frees its resources. Heat it added
// is left to decay: heat is recent utilisation, not current use.
func (g *Graph) RemovePod(name string) error {
	r, ok := g.pods[name]
	if !ok {
		return fmt.Errorf("remove pod %s: %w", name, ErrPodNotFound)
	}
	g.untrack(r, false)
	return nil
}

// untrack undoes track; withHeat also takes back the heat (Unreserve).
func (g *Graph) untrack(r int32, withHeat bool) {
	rec := &g.podRecs[r]
	ns := &g.nodes[rec.node]
	ns.free = ns.free.Add(rec.req)
	if withHeat {
		ns.heat -= rec.heatAdd
	}
	g.bump(rec.group, ns, -1)
	if rec.service != rec.group {
		g.bump(rec.service, ns, -1)
	}
	delete(g.pods, rec.name)
	*rec = podRec{}
	g.podFree = append(g.podFree, r)
}

// countNodePods adds delta to the counters of every pod tracked on node id
// (used when a node moves between domains).
func (g *Graph) countNodePods(id int32, delta int32) {
	ns := &g.nodes[id]
	for i := range g.podRecs {
		rec := &g.podRecs[i]
		if !rec.occupied || rec.node != id {
			continue
		}
		g.bump(rec.group, ns, delta)
		if rec.service != rec.group {
			g.bump(rec.service, ns, delta)
		}
	}
}

// forgetNodePods untracks every pod on node id.
func (g *Graph) forgetNodePods(id int32) {
	for i := range g.podRecs {
		if g.podRecs[i].occupied && g.podRecs[i].node == id {
			g.untrack(int32(i), false)
		}
	}
}

// PodNode returns the node a tracked pod is on.
func (g *Graph) PodNode(name string) (string, bool) {
	r, ok := g.pods[name]
	if !ok {
		return "", false
	}
	return g.cold[g.podRecs[r].node].name, true
}

// DomainCount is how many pods of one group or service sit in a domain.
type DomainCount struct {
	Domain string `json:"domain"`
	Count  int    `json:"count"`
}

// DomainCounts returns, for the topology key, the pod count of name in
// every domain that has live nodes, in topology order (the order domains
// were first seen).
func (g *Graph) DomainCounts(name, key string) ([]DomainCount, error) {
	l := g.Level(key)
	if l < 0 {
		return nil, fmt.Errorf("domain counts: %q is not a topology key", key)
	}
	id := g.counterID(name)
	doms := slices.Clone(g.level[l])
	slices.SortFunc(doms, func(a, b int32) int { return int(g.domains[a].start - g.domains[b].start) })
	var out []DomainCount
	for _, d := range doms {
		if g.domains[d].size() == 0 {
			continue
		}
		n := 0
		if id >= 0 {
			n = int(g.counters[id].dom[d])
		}
		out = append(out, DomainCount{Domain: g.domainName(d), Count: n})
	}
	return out, nil
}

// GroupSize is how many placed (or assumed) pods the group or service
// name has.
func (g *Graph) GroupSize(name string) int {
	if id := g.counterID(name); id >= 0 {
		return int(g.counters[id].total)
	}
	return 0
}
