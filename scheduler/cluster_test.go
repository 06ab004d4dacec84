package scheduler

import (
	"fmt"
	"testing"
	"time"
)

// Test topology keys: zone then rack.
const labelRack = "topology.sluice.io/rack"

var testKeys = []string{LabelZone, labelRack}

// clusterSpec describes a synthetic cluster.
type clusterSpec struct {
	zones, racks, perRack int
	cpu                   int64 // millicores per node
	mem                   int64
	pods                  int64
	taintEvery            int // every n-th node gets a dedicated=gpu:NoSchedule taint (0: none)
}

// nodes builds the cluster deterministically: node types alternate per
// rack, heat varies with the index.
func (c clusterSpec) nodes() []Node {
	var out []Node
	i := 0
	for z := range c.zones {
		for r := range c.racks {
			for n := range c.perRack {
				node := Node{
					Name: fmt.Sprintf("z%d-r%d-n%d", z, r, n),
					Labels: map[string]string{
						LabelZone:          fmt.Sprintf("zone-%d", z),
						labelRack:          fmt.Sprintf("rack-%d", r),
						LabelInstanceType:  []string{"m5.large", "c5.xlarge"}[r%2],
						"sluice.io/pool":   []string{"general", "batch"}[n%2],
						"kubernetes.io/os": "linux",
					},
					Capacity: Resources{MilliCPU: c.cpu, Memory: c.mem, Pods: c.pods},
					Heat:     float64((i*37)%100) / 100,
				}
				if c.taintEvery > 0 && i%c.taintEvery == 0 {
					node.Taints = []Taint{{Key: "dedicated", Value: "gpu", Effect: TaintNoSchedule}}
				}
				out = append(out, node)
				i++
			}
		}
	}
	return out
}

// fixedClock is a clock tests move by hand.
type fixedClock struct{ t time.Time }

func (c *fixedClock) now() time.Time { return c.t }

// newTestScheduler builds a scheduler over nodes with a fixed clock.
func newTestScheduler(t testing.TB, opts Options, nodes []Node) *Scheduler {
	t.Helper()
	if opts.Graph.TopologyKeys == nil {
		opts.Graph.TopologyKeys = testKeys
	}
	if opts.Clock == nil {
		c := &fixedClock{t: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)}
		opts.Clock = c.now
	}
	s, err := New(opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(s.Close)
	if err := s.Update(func(g *Graph) error {
		for _, n := range nodes {
			if err := g.AddNode(n); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatalf("add nodes: %v", err)
	}
	return s
}

// canaryPod is a pod of group ns/app/canary with the usual requests.
func canaryPod(app string, i int, cpu int64) Pod {
	return Pod{
		Name:     fmt.Sprintf("default/%s-canary-%d", app, i),
		Group:    "default/" + app + "/canary",
		Service:  "default/" + app,
		Role:     RoleCanary,
		Requests: Resources{MilliCPU: cpu, Memory: 64 << 20},
	}
}
