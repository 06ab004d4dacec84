package scheduler

import (
	"context"
	"slices"
	"testing"
)

// harness builds one plugin over a graph of nodes, with pods already
// placed, and runs its extension points the way the cycle does.
type harness struct {
	t     *testing.T
	g     *Graph
	fw    *framework
	p     Plugin
	state CycleState
}

func newHarness(t *testing.T, factory PluginFactory, args any, nodes []Node, placed map[string]Pod) *harness {
	t.Helper()
	g, err := NewGraph(GraphOptions{TopologyKeys: testKeys})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if err := g.AddNode(n); err != nil {
			t.Fatal(err)
		}
	}
	for nodeName, p := range placed {
		if err := g.AddPod(&p, nodeName); err != nil {
			t.Fatal(err)
		}
	}
	fw := &framework{g: g}
	p, err := factory(args, fw)
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, g: g, fw: fw, p: p}
}

// filter returns, per node name, the rejection reason ("" accepted).
func (h *harness) filter(pod Pod) map[string]string {
	h.t.Helper()
	var pi PodInfo
	h.g.compile(&pi, &pod)
	ctx := context.Background()
	if pf, ok := h.p.(PreFilterPlugin); ok {
		if st := pf.PreFilter(ctx, &h.state, &pi); st != nil {
			h.t.Fatalf("PreFilter: %v", st)
		}
	}
	out := map[string]string{}
	for _, id := range h.g.order {
		st := h.p.(FilterPlugin).Filter(ctx, &h.state, &pi, &h.g.nodes[id])
		out[h.g.cold[id].name] = st.Reason()
	}
	if b, ok := h.p.(BatchFilterPlugin); ok {
		var tl tally
		kept := b.FilterNodes(ctx, &h.state, &pi, slices.Clone(h.g.order), &Rejections{t: &tl})
		var wantKept []int32
		rejected := map[string]int{}
		for _, id := range h.g.order {
			if r := out[h.g.cold[id].name]; r == "" {
				wantKept = append(wantKept, id)
			} else {
				rejected[r]++
			}
		}
		got := map[string]int{}
		for i, st := range tl.st {
			got[st.Reason()] += tl.n[i]
		}
		if !slices.Equal(kept, wantKept) || !mapsEqual(got, rejected) {
			h.t.Fatalf("FilterNodes kept %v rejected %v; Filter keeps %v rejects %v", kept, got, wantKept, rejected)
		}
	}
	return out
}

// score returns normalised scores per node name (nil when PreScore skips).
func (h *harness) score(pod Pod) map[string]int64 {
	h.t.Helper()
	var pi PodInfo
	h.g.compile(&pi, &pod)
	ctx := context.Background()
	ids := slices.Clone(h.g.order)
	if ps, ok := h.p.(PreScorePlugin); ok {
		if st := ps.PreScore(ctx, &h.state, &pi, ids); st.Code() == Skip {
			return nil
		}
	}
	sp := h.p.(ScorePlugin)
	sc := make([]int64, len(ids))
	for i, id := range ids {
		v, st := sp.Score(ctx, &h.state, &pi, &h.g.nodes[id])
		if st != nil {
			h.t.Fatalf("Score: %v", st)
		}
		sc[i] = v
	}
	if b, ok := h.p.(BatchScorePlugin); ok {
		batch := make([]int64, len(ids))
		if st := b.ScoreNodes(ctx, &h.state, &pi, ids, batch); st != nil {
			h.t.Fatalf("ScoreNodes: %v", st)
		}
		if !slices.Equal(batch, sc) {
			h.t.Fatalf("ScoreNodes = %v, Score gives %v", batch, sc)
		}
	}
	if ext := sp.ScoreExtensions(); ext != nil {
		if st := ext.NormalizeScore(ctx, &h.state, &pi, sc); st != nil {
			h.t.Fatalf("NormalizeScore: %v", st)
		}
	}
	out := map[string]int64{}
	for i, id := range ids {
		out[h.g.cold[id].name] = sc[i]
	}
	return out
}

func withRes(n Node, cpu, mem, pods int64) Node {
	n.Capacity = Resources{MilliCPU: cpu, Memory: mem, Pods: pods}
	return n
}

func TestFitFilter(t *testing.T) {
	busy := withRes(node("busy", "a", "r"), 1000, 1000, 10)
	busy.Allocated = Resources{MilliCPU: 900, Memory: 100, Pods: 1}
	full := withRes(node("full", "a", "r"), 1000, 1000, 1)
	full.Allocated = Resources{Pods: 1}
	nodes := []Node{withRes(node("big", "a", "r"), 4000, 4000, 10), withRes(node("small-mem", "a", "r"), 4000, 100, 10), busy, full}
	tests := []struct {
		name string
		req  Resources
		want map[string]string
	}{
		{"small pod fits where slots are free", Resources{MilliCPU: 100, Memory: 100}, map[string]string{"big": "", "small-mem": "", "busy": "", "full": "Too many pods"}},
		{"cpu", Resources{MilliCPU: 200, Memory: 10}, map[string]string{"big": "", "small-mem": "", "busy": "Insufficient cpu", "full": "Too many pods"}},
		{"memory", Resources{MilliCPU: 10, Memory: 200}, map[string]string{"big": "", "small-mem": "Insufficient memory", "busy": "", "full": "Too many pods"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, NewFit, nil, nodes, nil)
			if got := h.filter(Pod{Name: "p", Requests: tc.req}); !mapsEqual(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestTaintTolerationFilter(t *testing.T) {
	tainted := node("tainted", "a", "r")
	tainted.Taints = []Taint{{Key: "dedicated", Value: "gpu", Effect: TaintNoSchedule}}
	soft := node("soft", "a", "r")
	soft.Taints = []Taint{{Key: "spot", Effect: TaintPreferNoSchedule}}
	cordoned := node("cordoned", "a", "r")
	cordoned.Unschedulable = true
	nodes := []Node{node("plain", "a", "r"), tainted, soft, cordoned}
	const untol, cord = "node(s) had untolerated taint", "node(s) were unschedulable"
	tests := []struct {
		name string
		tols []Toleration
		want map[string]string
	}{
		{"no tolerations", nil, map[string]string{"plain": "", "tainted": untol, "soft": "", "cordoned": cord}},
		{"equal", []Toleration{{Key: "dedicated", Value: "gpu", Effect: TaintNoSchedule}}, map[string]string{"plain": "", "tainted": "", "soft": "", "cordoned": cord}},
		{"wrong value", []Toleration{{Key: "dedicated", Value: "cpu"}}, map[string]string{"plain": "", "tainted": untol, "soft": "", "cordoned": cord}},
		{"exists any effect", []Toleration{{Key: "dedicated", Operator: TolerationExists}}, map[string]string{"plain": "", "tainted": "", "soft": "", "cordoned": cord}},
		{"wrong effect", []Toleration{{Key: "dedicated", Operator: TolerationExists, Effect: TaintNoExecute}}, map[string]string{"plain": "", "tainted": untol, "soft": "", "cordoned": cord}},
		{"tolerate everything", []Toleration{{Operator: TolerationExists}}, map[string]string{"plain": "", "tainted": "", "soft": "", "cordoned": cord}},
		{"unknown key", []Toleration{{Key: "nope", Operator: TolerationExists}}, map[string]string{"plain": "", "tainted": untol, "soft": "", "cordoned": cord}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, NewTaintToleration, nil, nodes, nil)
			if got := h.filter(Pod{Name: "p", Tolerations: tc.tols}); !mapsEqual(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNodeAffinityFilter(t *testing.T) {
	const no = "node(s) didn't match Pod's node affinity/selector"
	ssd := node("ssd", "a", "r")
	ssd.Labels["disk"] = "ssd"
	hdd := node("hdd", "b", "r")
	hdd.Labels["disk"] = "hdd"
	nodes := []Node{ssd, hdd, node("none", "c", "r")}
	req := func(k string, op SelectorOperator, v ...string) []SelectorTerm {
		return []SelectorTerm{{MatchExpressions: []SelectorRequirement{{Key: k, Operator: op, Values: v}}}}
	}
	tests := []struct {
		name string
		pod  Pod
		want map[string]string
	}{
		{"no selector", Pod{}, map[string]string{"ssd": "", "hdd": "", "none": ""}},
		{"node selector", Pod{NodeSelector: map[string]string{"disk": "ssd"}}, map[string]string{"ssd": "", "hdd": no, "none": no}},
		{"selector value nobody has", Pod{NodeSelector: map[string]string{"disk": "nvme"}}, map[string]string{"ssd": no, "hdd": no, "none": no}},
		{"in", Pod{RequiredAffinity: req("disk", SelectorIn, "ssd", "hdd")}, map[string]string{"ssd": "", "hdd": "", "none": no}},
		{"not in", Pod{RequiredAffinity: req("disk", SelectorNotIn, "ssd")}, map[string]string{"ssd": no, "hdd": "", "none": ""}},
		{"exists", Pod{RequiredAffinity: req("disk", SelectorExists)}, map[string]string{"ssd": "", "hdd": "", "none": no}},
		{"does not exist", Pod{RequiredAffinity: req("disk", SelectorDoesNotExist)}, map[string]string{"ssd": no, "hdd": no, "none": ""}},
		{"terms are ORed", Pod{RequiredAffinity: append(req("disk", SelectorIn, "ssd"), req(LabelZone, SelectorIn, "c")...)}, map[string]string{"ssd": "", "hdd": no, "none": ""}},
		{"selector and terms both apply", Pod{NodeSelector: map[string]string{LabelZone: "a"}, RequiredAffinity: req("disk", SelectorExists)}, map[string]string{"ssd": "", "hdd": no, "none": no}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, NewNodeAffinity, nil, nodes, nil)
			tc.pod.Name = "p"
			// Twice: the second run answers from the memo.
			for range 2 {
				if got := h.filter(tc.pod); !mapsEqual(got, tc.want) {
					t.Fatalf("got %v, want %v", got, tc.want)
				}
			}
		})
	}
}

func TestFailureDomainFilter(t *testing.T) {
	nolabel := Node{Name: "nolabel", Labels: map[string]string{labelRack: "r"}, Capacity: Resources{MilliCPU: 1000, Pods: 10}}
	nodes := []Node{node("a1", "a", "r1"), node("a2", "a", "r2"), node("b1", "b", "r1"), node("c1", "c", "r1"), nolabel}
	canary := func(name string) Pod { return Pod{Name: name, Group: "web/canary", Service: "web"} }
	const skew, crit, nokey = "node(s) didn't satisfy maxSkew 1 on " + LabelZone, "node(s) in a failure domain of a critical service", "node(s) didn't have the " + LabelZone + " label"
	tests := []struct {
		name   string
		args   *FailureDomainArgs
		placed map[string]Pod
		pod    Pod
		want   map[string]string
	}{
		{"empty cluster: any zone", nil, nil, canary("p"),
			map[string]string{"a1": "", "a2": "", "b1": "", "c1": "", "nolabel": nokey}},
		{"one pod in a: a would make skew 2", nil, map[string]Pod{"a1": canary("x")}, canary("p"),
			map[string]string{"a1": skew, "a2": skew, "b1": "", "c1": "", "nolabel": nokey}},
		{"maxSkew 2 allows it", &FailureDomainArgs{MaxSkew: 2}, map[string]Pod{"a1": canary("x")}, canary("p"),
			map[string]string{"a1": "", "a2": "", "b1": "", "c1": "", "nolabel": nokey}},
		{"other groups do not count", nil, map[string]Pod{"a1": {Name: "x", Group: "api/canary"}}, canary("p"),
			map[string]string{"a1": "", "a2": "", "b1": "", "c1": "", "nolabel": nokey}},
		{"critical service zone avoided and not counted for min", &FailureDomainArgs{CriticalServices: []string{"db"}},
			map[string]Pod{"c1": {Name: "db-0", Service: "db"}, "a1": canary("x"), "b1": canary("y")}, canary("p"),
			// c counted with 0 pods would make a and b violate maxSkew.
			map[string]string{"a1": "", "a2": "", "b1": "", "c1": crit, "nolabel": nokey}},
		{"critical service does not avoid itself", &FailureDomainArgs{CriticalServices: []string{"db"}},
			map[string]Pod{"c1": {Name: "db-0", Service: "db"}}, Pod{Name: "db-1", Service: "db"},
			map[string]string{"a1": "", "a2": "", "b1": "", "c1": "", "nolabel": nokey}},
		{"rack key", &FailureDomainArgs{TopologyKey: labelRack}, map[string]Pod{"a1": canary("x")}, canary("p"),
			// Racks are per zone: only a/r1 holds a pod.
			map[string]string{"a1": skew[:len(skew)-len(LabelZone)] + labelRack, "a2": "", "b1": "", "c1": "", "nolabel": ""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var args any
			if tc.args != nil {
				args = tc.args
			}
			h := newHarness(t, NewFailureDomain, args, nodes, tc.placed)
			if got := h.filter(tc.pod); !mapsEqual(got, tc.want) {
				t.Fatalf("got %v\nwant %v", got, tc.want)
			}
			// The per-domain verdicts agree with Filter.
			var pi PodInfo
			h.g.compile(&pi, &tc.pod)
			level, verdicts := h.p.(DomainFilterPlugin).FilterDomains(context.Background(), &h.state, &pi)
			for _, id := range h.g.order {
				n := &h.g.nodes[id]
				name := h.g.cold[id].name
				if got := verdicts[n.dom[level]].Reason(); got != tc.want[name] {
					t.Errorf("domain verdict for %s = %q, want %q", name, got, tc.want[name])
				}
			}
		})
	}
}

func TestFailureDomainArgs(t *testing.T) {
	tests := []struct {
		name string
		args any
		ok   bool
	}{
		{"defaults", nil, true},
		{"unknown key", &FailureDomainArgs{TopologyKey: "nope"}, false},
		{"negative skew", &FailureDomainArgs{MaxSkew: -1}, false},
		{"wrong type", &TopologySpreadArgs{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, _ := NewGraph(GraphOptions{TopologyKeys: testKeys})
			_, err := NewFailureDomain(tc.args, &framework{g: g})
			if (err == nil) != tc.ok {
				t.Fatalf("err = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}

func TestScorePlugins(t *testing.T) {
	hot := node("hot", "a", "r1")
	hot.Heat = 0.9
	warm := node("warm", "a", "r2")
	warm.Heat = 0.5
	cold := node("cold", "b", "r1")
	cold.Heat = 0.1
	m5 := func(n Node) Node { n.Labels[LabelInstanceType] = "m5"; return n }
	c5 := func(n Node) Node { n.Labels[LabelInstanceType] = "c5"; return n }
	nodes := []Node{m5(hot), c5(warm), m5(cold)}
	canary := func(name string) Pod { return Pod{Name: name, Group: "web/canary", Service: "web", Role: RoleCanary} }
	baseline := Pod{Name: "b", Group: "web/baseline", Service: "web", Role: RoleBaseline, MatchGroup: "web/canary"}
	tests := []struct {
		name    string
		factory PluginFactory
		args    any
		placed  map[string]Pod
		pod     Pod
		want    map[string]int64 // nil: plugin skips
	}{
		{"least heat", NewLeastHeat, nil, nil, canary("p"), map[string]int64{"hot": 0, "warm": 50, "cold": 100}},
		{"dependency affinity: same rack beats same zone", NewDependencyAffinity, nil,
			map[string]Pod{"hot": {Name: "db-0", Service: "db"}}, Pod{Name: "p", Dependencies: []string{"db"}},
			map[string]int64{"hot": 100, "warm": 33, "cold": 0}},
		{"dependency affinity: no dependencies skips", NewDependencyAffinity, nil, nil, canary("p"), nil},
		{"spread by rack", NewTopologySpread, nil, map[string]Pod{"hot": canary("x")}, canary("p"),
			map[string]int64{"hot": 0, "warm": 100, "cold": 100}},
		{"spread by zone", NewTopologySpread, &TopologySpreadArgs{TopologyKey: LabelZone}, map[string]Pod{"hot": canary("x")}, canary("p"),
			map[string]int64{"hot": 0, "warm": 0, "cold": 100}},
		{"baseline follows canary cell", NewBaselineMatch, nil, map[string]Pod{"hot": canary("x")}, baseline,
			map[string]int64{"hot": 100, "warm": 33, "cold": 0}},
		{"baseline in another cell does not pair with the canary", NewBaselineMatch, nil,
			map[string]Pod{"hot": canary("x"), "warm": {Name: "b0", Group: "web/baseline", Service: "web"}}, baseline,
			map[string]int64{"hot": 100, "warm": 0, "cold": 0}},
		{"paired cell still beats other zones", NewBaselineMatch, nil,
			map[string]Pod{"hot": canary("x"), "warm": canary("y"), "cold": {Name: "b0", Group: "web/baseline", Service: "web"}}, baseline,
			map[string]int64{"hot": 100, "warm": 100, "cold": 0}},
		{"canary pods skip baseline matching", NewBaselineMatch, nil, nil, canary("p"), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.factory, tc.args, nodes, tc.placed)
			got := h.score(tc.pod)
			if tc.want == nil {
				if got != nil {
					t.Fatalf("got %v, want skip", got)
				}
				return
			}
			for k, v := range got {
				if v < 0 || v > MaxNodeScore {
					t.Fatalf("score %s = %d out of range", k, v)
				}
			}
			if !mapsEqual(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func mapsEqual[V comparable](a, b map[string]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
