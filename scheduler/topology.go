package scheduler

// topology keeps the domain tree. Nodes sit in order, sorted by domain path,
// so every domain (a zone, a rack in a zone, ...) is the index range
// [start, end) of order. scan is a second, derived order that interleaves
// domains round-robin (zone a, zone b, zone c, zone a, ...), the way
// kube-scheduler's node tree does, so that sampling a prefix of it covers
// every domain; it is rebuilt lazily after node additions or removals.
type topology struct {
	levels    int
	nodeGen   uint64 // bumped on every node change; caches keyed on node labels check it
	domains   []domain
	domainIdx map[domainKey]int32
	roots     []int32 // top-level domains
	level     [][]int32
	cells     []cell
	cellIdx   map[cellKey]int32
	order     []int32
	scan      []int32
	scanDom   [][]int32 // scanDom[l][i] is the level-l domain of node scan[i]
	scanRun   [][]int32 // scanRun[l][i] counts nodes from i on in the same level-l domain
	scanDirty bool
}

type domain struct {
	level    int
	value    int32 // interned label value ("" when nodes lack the key)
	parent   int32 // -1 at the top level
	n        int32 // live nodes
	start    int32 // range in order, kept by layout
	end      int32
	children []int32
}

type domainKey struct{ parent, value int32 }

// cell is a (domain at the cell level, node type) pair.
type cell struct{ dom, typ int32 }

type cellKey struct{ dom, typ int32 }

func (t *topology) init(levels int) {
	t.levels = levels
	t.domainIdx = make(map[domainKey]int32)
	t.cellIdx = make(map[cellKey]int32)
	t.level = make([][]int32, levels)
}

// size is the number of live nodes in domain d.
func (d *domain) size() int32 { return d.n }

// insertNode places node id at the end of its innermost domain, creating
// domains as needed, and shifts the ranges after it.
func (g *Graph) insertNode(id int32) {
	ns := &g.nodes[id]
	vals := g.topologyValues(ns)
	parent := int32(-1)
	var path [MaxTopologyLevels]int32
	for l := 0; l < g.levels; l++ {
		d, ok := g.domainIdx[domainKey{parent, vals[l]}]
		if !ok {
			pos := int32(len(g.order))
			if parent >= 0 {
				pos = g.domains[parent].end
			}
			d = int32(len(g.domains))
			g.domains = append(g.domains, domain{level: l, value: vals[l], parent: parent, start: pos, end: pos})
			g.domainIdx[domainKey{parent, vals[l]}] = d
			g.level[l] = append(g.level[l], d)
			if parent >= 0 {
				g.domains[parent].children = append(g.domains[parent].children, d)
			} else {
				g.roots = append(g.roots, d)
			}
		}
		path[l] = d
		parent = d
	}
	copy(ns.dom[:], path[:g.levels])
	g.nodeGen++
	pos := g.domains[path[g.levels-1]].end
	for _, d := range path[:g.levels] {
		g.domains[d].n++
	}
	g.layout()
	g.order = append(g.order, 0)
	copy(g.order[pos+1:], g.order[pos:])
	g.order[pos] = id
	for i := pos; i < int32(len(g.order)); i++ {
		g.cold[g.order[i]].pos = i
	}
	ck := cellKey{path[g.cellLevel], g.cold[id].typ}
	c, ok := g.cellIdx[ck]
	if !ok {
		c = int32(len(g.cells))
		g.cells = append(g.cells, cell(ck))
		g.cellIdx[ck] = c
	}
	ns.cell = c
	g.scanDirty = true
}

// layout recomputes every domain's range from the domain sizes, in tree
// order. Nodes in order are already grouped that way, so this is O(domains)
// and leaves no ambiguity about where an empty domain sits.
func (g *Graph) layout() {
	pos := int32(0)
	var walk func(ds []int32)
	walk = func(ds []int32) {
		for _, d := range ds {
			dom := &g.domains[d]
			dom.start = pos
			if dom.level == g.levels-1 {
				pos += dom.n
			} else {
				walk(dom.children)
			}
			dom.end = pos
		}
	}
	walk(g.roots)
}

// removeFromTopology takes node id out of order and shrinks its domains.
// Empty domains stay (with size 0) so pod counters keep their indexes.
func (g *Graph) removeFromTopology(id int32) {
	ns := &g.nodes[id]
	pos := g.cold[id].pos
	for _, d := range ns.dom[:g.levels] {
		g.domains[d].n--
	}
	g.layout()
	g.nodeGen++
	g.order = append(g.order[:pos], g.order[pos+1:]...)
	for i := pos; i < int32(len(g.order)); i++ {
		g.cold[g.order[i]].pos = i
	}
	g.scanDirty = true
}

// scanOrder returns the interleaved node order, rebuilding it if nodes
// were added or removed since the last call. The rebuild also renumbers
// the nodes so that node IDs follow scan order: a filter pass then walks
// the node slice forwards instead of jumping around it, which matters once
// the slice outgrows the CPU caches (50,000 nodes is about 10 MB).
func (g *Graph) scanOrder() []int32 {
	if g.scanDirty || len(g.scan) != len(g.order) {
		g.renumber(g.interleave(g.roots, nil))
		g.scan = g.scan[:0]
		for i := range g.order {
			g.scan = append(g.scan, int32(i))
		}
		g.scanDom, g.scanRun = g.scanDom[:0], g.scanRun[:0]
		for l := 0; l < g.levels; l++ {
			doms := make([]int32, len(g.scan))
			for i := range g.scan {
				doms[i] = g.nodes[i].dom[l]
			}
			run := make([]int32, len(g.scan))
			for i := len(run) - 1; i >= 0; i-- {
				run[i] = 1
				if i+1 < len(run) && doms[i+1] == doms[i] {
					run[i] = run[i+1] + 1
				}
			}
			g.scanDom = append(g.scanDom, doms)
			g.scanRun = append(g.scanRun, run)
		}
		g.scanDirty = false
	}
	return g.scan
}

// renumber moves the live nodes to IDs 0..n-1 in the given order and
// rewrites every stored node ID. Caches keyed by node ID see nodeGen move.
func (g *Graph) renumber(scan []int32) {
	newID := make([]int32, len(g.nodes))
	nodes := make([]NodeState, len(scan), len(scan)+len(scan)/8)
	cold := make([]nodeCold, len(scan), cap(nodes))
	for i, old := range scan {
		nodes[i], cold[i] = g.nodes[old], g.cold[old]
		nodes[i].id = int32(i)
		newID[old] = int32(i)
	}
	g.nodes, g.cold, g.free = nodes, cold, g.free[:0]
	for i := range g.order {
		g.order[i] = newID[g.order[i]]
	}
	for name, id := range g.byName {
		g.byName[name] = newID[id]
	}
	for i := range g.podRecs {
		if g.podRecs[i].occupied {
			g.podRecs[i].node = newID[g.podRecs[i].node]
		}
	}
	g.nodeGen++
}

// scanBlock is how many consecutive nodes of one domain the scan order
// takes before moving to the next domain. Blocks keep sampling spread over
// domains while letting a filter pass skip a rejected domain's block in one
// step (Graph.scanRun).
const scanBlock = 8

// interleave appends the nodes of domains ds round-robin, a block of
// scanBlock nodes from each domain in turn, recursively.
func (g *Graph) interleave(ds []int32, out []int32) []int32 {
	lists := make([][]int32, 0, len(ds))
	for _, d := range ds {
		dom := &g.domains[d]
		if dom.size() == 0 {
			continue
		}
		if dom.level == g.levels-1 {
			lists = append(lists, g.order[dom.start:dom.end])
		} else {
			lists = append(lists, g.interleave(dom.children, nil))
		}
	}
	for i := 0; ; i += scanBlock {
		added := false
		for _, l := range lists {
			if i < len(l) {
				out = append(out, l[i:min(i+scanBlock, len(l))]...)
				added = true
			}
		}
		if !added {
			return out
		}
	}
}

// DomainName is the path of domain d, e.g. "eu-1/eu-1a/r3".
func (g *Graph) domainName(d int32) string {
	s := ""
	for d >= 0 {
		v := g.strs.str(g.domains[d].value)
		if s == "" {
			s = v
		} else {
			s = v + "/" + s
		}
		d = g.domains[d].parent
	}
	return s
}

// DomainValue is the label value of domain d.
func (g *Graph) domainValue(d int32) string { return g.strs.str(g.domains[d].value) }
