package scheduler

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"
	"unsafe"
)

// checkGraph verifies the topology invariants: order holds exactly the live
// nodes, every node's position matches, every domain's range holds exactly
// the nodes whose path contains it, and the scan order is a permutation.
func checkGraph(t *testing.T, g *Graph) {
	t.Helper()
	if len(g.order) != g.live {
		t.Fatalf("order has %d nodes, live %d", len(g.order), g.live)
	}
	for i, id := range g.order {
		if !g.cold[id].live || g.cold[id].pos != int32(i) || g.nodes[id].id != id {
			t.Fatalf("order[%d]=%d: live=%v pos=%d id=%d", i, id, g.cold[id].live, g.cold[id].pos, g.nodes[id].id)
		}
	}
	for d := range g.domains {
		dom := &g.domains[d]
		for i := int32(0); i < int32(len(g.order)); i++ {
			in := g.nodes[g.order[i]].dom[dom.level] == int32(d)
			if in != (i >= dom.start && i < dom.end) {
				t.Fatalf("domain %s [%d,%d): node %s at %d in=%v", g.domainName(int32(d)), dom.start, dom.end, g.cold[g.order[i]].name, i, in)
			}
		}
	}
	scan := slices.Clone(g.scanOrder())
	slices.Sort(scan)
	want := slices.Clone(g.order)
	slices.Sort(want)
	if !slices.Equal(scan, want) {
		t.Fatalf("scan order is not a permutation of the nodes")
	}
}

func node(name, zone, rack string) Node {
	return Node{Name: name, Labels: map[string]string{LabelZone: zone, labelRack: rack}, Capacity: Resources{MilliCPU: 1000, Memory: 1 << 30, Pods: 10}}
}

func TestGraphTopologyUpdates(t *testing.T) {
	type op struct {
		add    *Node
		update *Node
		remove string
	}
	n := func(name, zone, rack string) *Node { x := node(name, zone, rack); return &x }
	tests := []struct {
		name  string
		ops   []op
		nodes int
		zones map[string][]string // zone -> nodes in topology order
	}{
		{
			name:  "adds group by zone and rack",
			ops:   []op{{add: n("a1", "a", "r1")}, {add: n("b1", "b", "r1")}, {add: n("a2", "a", "r2")}, {add: n("a3", "a", "r1")}},
			nodes: 4,
			zones: map[string][]string{"a": {"a1", "a3", "a2"}, "b": {"b1"}},
		},
		{
			name:  "remove keeps ranges",
			ops:   []op{{add: n("a1", "a", "r1")}, {add: n("b1", "b", "r1")}, {add: n("a2", "a", "r1")}, {remove: "a1"}, {add: n("a4", "a", "r1")}},
			nodes: 3,
			zones: map[string][]string{"a": {"a2", "a4"}, "b": {"b1"}},
		},
		{
			name:  "update moves node between zones",
			ops:   []op{{add: n("x", "a", "r1")}, {add: n("y", "b", "r1")}, {update: n("x", "b", "r2")}},
			nodes: 2,
			zones: map[string][]string{"a": nil, "b": {"y", "x"}},
		},
		{
			name:  "empty domain refilled",
			ops:   []op{{add: n("x", "a", "r1")}, {add: n("y", "b", "r1")}, {remove: "x"}, {add: n("z", "c", "r1")}, {add: n("x2", "a", "r1")}},
			nodes: 3,
			zones: map[string][]string{"a": {"x2"}, "b": {"y"}, "c": {"z"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, err := NewGraph(GraphOptions{TopologyKeys: testKeys})
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range tc.ops {
				switch {
				case o.add != nil:
					err = g.AddNode(*o.add)
				case o.update != nil:
					err = g.UpdateNode(*o.update)
				default:
					err = g.RemoveNode(o.remove)
				}
				if err != nil {
					t.Fatal(err)
				}
				checkGraph(t, g)
			}
			if g.NumNodes() != tc.nodes {
				t.Fatalf("NumNodes = %d, want %d", g.NumNodes(), tc.nodes)
			}
			for zone, want := range tc.zones {
				d := g.domainIdx[domainKey{-1, g.strs.lookup(zone)}]
				var got []string
				for _, id := range g.order[g.domains[d].start:g.domains[d].end] {
					got = append(got, g.cold[id].name)
				}
				if !slices.Equal(got, want) {
					t.Errorf("zone %s nodes = %v, want %v", zone, got, want)
				}
			}
		})
	}
}

func TestGraphErrors(t *testing.T) {
	g, err := NewGraph(GraphOptions{TopologyKeys: testKeys})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.AddNode(node("a", "z", "r")); err != nil {
		t.Fatal(err)
	}
	p := Pod{Name: "p", Service: "s"}
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"duplicate node", g.AddNode(node("a", "z", "r")), ErrNodeExists},
		{"update missing", g.UpdateNode(node("b", "z", "r")), ErrNodeNotFound},
		{"remove missing", g.RemoveNode("b"), ErrNodeNotFound},
		{"pod on missing node", g.AddPod(&p, "b"), ErrNodeNotFound},
		{"remove missing pod", g.RemovePod("q"), ErrPodNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !errors.Is(tc.err, tc.want) {
				t.Fatalf("err = %v, want %v", tc.err, tc.want)
			}
		})
	}
	if _, err := NewGraph(GraphOptions{TopologyKeys: []string{"a", "a"}}); err == nil {
		t.Error("repeated topology key accepted")
	}
	if _, err := NewGraph(GraphOptions{TopologyKeys: []string{"a"}, CellKey: "b"}); err == nil {
		t.Error("cell key outside topology accepted")
	}
}

func TestGraphScanInterleavesZones(t *testing.T) {
	g, err := NewGraph(GraphOptions{TopologyKeys: testKeys})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range (clusterSpec{zones: 3, racks: 2, perRack: 8, cpu: 1000, mem: 1 << 30, pods: 10}).nodes() {
		if err := g.AddNode(n); err != nil {
			t.Fatal(err)
		}
	}
	// Blocks of scanBlock nodes per zone, zones in turn.
	var zones []string
	scan := g.scanOrder()
	for i := 0; i < 6*scanBlock; i += scanBlock {
		zones = append(zones, g.strs.str(g.domains[g.nodes[scan[i]].dom[0]].value))
	}
	want := []string{"zone-0", "zone-1", "zone-2", "zone-0", "zone-1", "zone-2"}
	if !slices.Equal(zones, want) {
		t.Fatalf("first scan zones = %v, want %v", zones, want)
	}
}

func TestGraphPodsAndCounts(t *testing.T) {
	g, err := NewGraph(GraphOptions{TopologyKeys: testKeys})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []Node{node("a1", "a", "r1"), node("a2", "a", "r2"), node("b1", "b", "r1")} {
		if err := g.AddNode(n); err != nil {
			t.Fatal(err)
		}
	}
	pods := []struct{ pod, node string }{{"p1", "a1"}, {"p2", "a2"}, {"p3", "b1"}}
	for _, p := range pods {
		pod := Pod{Name: p.pod, Group: "g", Service: "svc", Requests: Resources{MilliCPU: 100}}
		if err := g.AddPod(&pod, p.node); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name   string
		mutate func() error
		want   []DomainCount
		used   int64 // cpu used on a1
	}{
		{"after adds", func() error { return nil }, []DomainCount{{"a", 2}, {"b", 1}}, 100},
		{"remove pod", func() error { return g.RemovePod("p2") }, []DomainCount{{"a", 1}, {"b", 1}}, 100},
		{"move node", func() error { return g.UpdateNode(node("a1", "b", "r1")) }, []DomainCount{{"a", 0}, {"b", 2}}, 100},
		{"remove node forgets pods", func() error { return g.RemoveNode("b1") }, []DomainCount{{"a", 0}, {"b", 1}}, 100},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.mutate(); err != nil {
				t.Fatal(err)
			}
			checkGraph(t, g)
			got, err := g.DomainCounts("g", LabelZone)
			if err != nil {
				t.Fatal(err)
			}
			slices.SortFunc(got, func(a, b DomainCount) int { return cmpStr(a.Domain, b.Domain) })
			if !slices.Equal(got, tc.want) {
				t.Fatalf("counts = %v, want %v", got, tc.want)
			}
			if s, _ := g.Node("a1"); s.Used.MilliCPU != tc.used {
				t.Fatalf("a1 cpu used = %d, want %d", s.Used.MilliCPU, tc.used)
			}
		})
	}
	if _, ok := g.PodNode("p3"); ok {
		t.Error("pod on removed node still tracked")
	}
}

func cmpStr(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func TestGraphHeatDecay(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name  string
		after time.Duration
		want  float64
	}{
		{"now", 0, 0.8},
		{"one half-life", time.Minute, 0.4},
		{"two half-lives", 2 * time.Minute, 0.2},
		{"after rebase", 60 * time.Minute, 0.8 * math.Pow(0.5, 60)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, err := NewGraph(GraphOptions{TopologyKeys: testKeys, HeatHalfLife: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			g.Advance(t0)
			n := node("a", "z", "r")
			n.Heat = 0.8
			if err := g.AddNode(n); err != nil {
				t.Fatal(err)
			}
			// Step through time so rebasing happens on the way.
			for s := time.Duration(0); s <= tc.after; s += time.Minute {
				g.Advance(t0.Add(s))
			}
			s, _ := g.Node("a")
			if math.Abs(s.Heat-tc.want) > 1e-9*math.Max(1, tc.want) && math.Abs(s.Heat-tc.want)/tc.want > 1e-6 {
				t.Fatalf("heat = %g, want %g", s.Heat, tc.want)
			}
		})
	}
}

func ExampleGraph_DomainCounts() {
	g, _ := NewGraph(GraphOptions{TopologyKeys: []string{LabelZone}})
	for i := range 4 {
		_ = g.AddNode(Node{Name: fmt.Sprint("n", i), Labels: map[string]string{LabelZone: fmt.Sprint("z", i%2)}, Capacity: Resources{MilliCPU: 1000, Pods: 10}})
	}
	_ = g.AddPod(&Pod{Name: "p", Group: "web"}, "n1")
	c, _ := g.DomainCounts("web", LabelZone)
	fmt.Println(c)
	// Output: [{z0 0} {z1 1}]
}

// The hot node record must stay one cache line: the filter pass reads one
// line per node.
func TestNodeStateFitsACacheLine(t *testing.T) {
	if size := unsafe.Sizeof(NodeState{}); size > 64 {
		t.Fatalf("NodeState is %d bytes, want ≤ 64", size)
	}
}
