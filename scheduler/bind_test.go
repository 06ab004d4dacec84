package scheduler

import (
	"context"
	"testing"
)

// refuseBinder is a bind plugin that refuses one node, as a Kubernetes
// binder would when the API server rejects a Binding.
type refuseBinder struct {
	g      *Graph
	refuse string
	bound  []string
}

var _ BindPlugin = &refuseBinder{}

func (b *refuseBinder) Name() string { return "RefuseBinder" }

func (b *refuseBinder) Bind(_ context.Context, _ *CycleState, pod *PodInfo, n *NodeState) *Status {
	if name := b.g.NodeName(n.ID()); name != b.refuse {
		b.bound = append(b.bound, pod.Pod.Name+"@"+name)
		return nil
	}
	return NewStatus(Error, "binding refused")
}

func TestBindFailureUnreserves(t *testing.T) {
	binder := &refuseBinder{}
	reg := NewInTreeRegistry()
	reg["RefuseBinder"] = func(_ any, h Handle) (Plugin, error) {
		binder.g = h.Graph()
		return binder, nil
	}
	nodes := []Node{node("a", "z1", "r"), node("b", "z2", "r")}
	plugins := []PluginConfig{{Name: NodeResourcesFitName}, {Name: LeastHeatName}, {Name: "RefuseBinder"}}
	tests := []struct {
		name   string
		refuse string
		placed bool
	}{
		{"bind succeeds", "", true},
		{"bind refused", "a", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			binder.refuse, binder.bound = tc.refuse, nil
			s := newTestScheduler(t, Options{Registry: reg, Plugins: plugins}, nodes)
			// Make a the only fitting node.
			p := Pod{Name: "p", Service: "web", Requests: Resources{MilliCPU: 600}}
			if err := s.Update(func(g *Graph) error {
				return g.AddPod(&Pod{Name: "filler", Requests: Resources{MilliCPU: 600}}, "b")
			}); err != nil {
				t.Fatal(err)
			}
			r := s.ScheduleOne(context.Background(), &p)
			if (r.Status == nil) != tc.placed {
				t.Fatalf("status = %v, want placed=%v", r.Status, tc.placed)
			}
			node, tracked := s.g.PodNode("p")
			sum, _ := s.g.Node("a")
			switch {
			case tc.placed && (node != "a" || len(binder.bound) != 1):
				t.Fatalf("placed on %q, bound %v", node, binder.bound)
			case !tc.placed && (tracked || sum.Used.MilliCPU != 0 || sum.Heat != 0):
				t.Fatalf("refused bind left pod tracked=%v, used %+v heat %g", tracked, sum.Used, sum.Heat)
			}
		})
	}
}
