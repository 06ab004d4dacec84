package scheduler

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestProperties schedules random pods on random clusters and checks after
// every decision that no node is over capacity, that every group's skew
// over eligible zones stays within maxSkew, and that an unschedulable pod
// comes with reasons covering every node and really has no feasible node.
func TestProperties(t *testing.T) {
	for seed := range uint64(40) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 99))
			spec := clusterSpec{
				zones: 2 + rng.IntN(3), racks: 1 + rng.IntN(3), perRack: 1 + rng.IntN(5),
				cpu: 500 + rng.Int64N(2000), mem: 1 << 30, pods: 2 + rng.Int64N(8), taintEvery: rng.IntN(4),
			}
			maxSkew := int32(1 + rng.IntN(3))
			var critical []string
			if rng.IntN(3) == 0 {
				critical = []string{"default/db"}
			}
			plugins := DefaultPlugins()
			plugins[slices.IndexFunc(plugins, func(p PluginConfig) bool { return p.Name == FailureDomainName })].Args = &FailureDomainArgs{MaxSkew: maxSkew, CriticalServices: critical}
			s := newTestScheduler(t, Options{Seed: seed, Plugins: plugins, Parallelism: 2, MinParallelNodes: 1 + rng.IntN(20), ChunkSize: 1 + rng.IntN(8)}, spec.nodes())
			if critical != nil {
				if err := s.Update(func(g *Graph) error {
					return g.AddPod(&Pod{Name: "db-0", Service: "default/db", Requests: Resources{MilliCPU: 10}}, g.NodeNames()[0])
				}); err != nil {
					t.Fatal(err)
				}
			}
			groups := []string{"a", "b", "c"}
			placed, unsched := 0, 0
			for i := range 150 {
				app := groups[rng.IntN(len(groups))]
				p := canaryPod(app, i, 50+rng.Int64N(600))
				if rng.IntN(3) == 0 {
					p.Tolerations = []Toleration{{Key: "dedicated", Operator: TolerationExists}}
				}
				if rng.IntN(4) == 0 {
					p.NodeSelector = map[string]string{"sluice.io/pool": "general"}
				}
				if rng.IntN(4) == 0 {
					p.Dependencies = []string{"default/db"}
				}
				r := s.ScheduleOne(context.Background(), &p)
				switch {
				case r.Status == nil:
					placed++
				case r.Status.IsRejected():
					unsched++
					checkUnschedulable(t, s, &p, r)
				default:
					t.Fatalf("pod %s: %v", p.Name, r.Status)
				}
				checkCapacity(t, s.g)
				for _, gname := range groups {
					checkSkew(t, s.g, "default/"+gname+"/canary", maxSkew, critical)
				}
			}
			t.Logf("%d placed, %d unschedulable, maxSkew %d", placed, unsched, maxSkew)
		})
	}
}

func checkCapacity(t *testing.T, g *Graph) {
	t.Helper()
	for _, id := range g.order {
		// Recompute use from the tracked pods rather than trusting free.
		c := &g.cold[id]
		used := c.base
		for _, rec := range g.podRecs {
			if rec.occupied && rec.node == id {
				used = used.Add(rec.req)
			}
		}
		if used.MilliCPU > c.capacity.MilliCPU || used.Memory > c.capacity.Memory || used.Pods > c.capacity.Pods {
			t.Fatalf("node %s over capacity: used %+v capacity %+v", c.name, used, c.capacity)
		}
		if want := c.capacity.Sub(used); g.nodes[id].free != want {
			t.Fatalf("node %s free %+v, want %+v", c.name, g.nodes[id].free, want)
		}
	}
}

// checkSkew recomputes the group's per-zone counts from the tracked pods
// (not from the counters the plugin reads) and checks max-min ≤ maxSkew
// over zones that host no critical service.
func checkSkew(t *testing.T, g *Graph, group string, maxSkew int32, critical []string) {
	t.Helper()
	perZone := map[string]int32{}
	avoided := map[string]bool{}
	for _, id := range g.order {
		perZone[g.cold[id].labelValue(g, LabelZone)] += 0
	}
	for _, rec := range g.podRecs {
		if !rec.occupied {
			continue
		}
		zone := g.cold[rec.node].labelValue(g, LabelZone)
		if rec.group >= 0 && g.counterNm[rec.group] == group {
			perZone[zone]++
		}
		for _, c := range critical {
			if rec.service >= 0 && g.counterNm[rec.service] == c {
				avoided[zone] = true
			}
		}
	}
	lo, hi := int32(1<<30), int32(-1)
	for z, c := range perZone {
		if avoided[z] {
			if c > 0 {
				t.Fatalf("group %s has %d pods in critical zone %s", group, c, z)
			}
			continue
		}
		lo, hi = min(lo, c), max(hi, c)
	}
	if hi >= 0 && hi-lo > maxSkew {
		t.Fatalf("group %s skew %d > %d: %v", group, hi-lo, maxSkew, perZone)
	}
}

func (n *nodeCold) labelValue(g *Graph, key string) string {
	return g.strs.str(n.label(g.strs.lookup(key)))
}

func checkUnschedulable(t *testing.T, s *Scheduler, p *Pod, r Result) {
	t.Helper()
	if r.Status.Reason() == "" || r.Diagnosis == nil || len(r.Diagnosis.Reasons) == 0 {
		t.Fatalf("pod %s unschedulable without reasons: %v", p.Name, r.Status)
	}
	sum := 0
	for _, rc := range r.Diagnosis.Reasons {
		sum += rc.Count
	}
	if sum != s.g.NumNodes() {
		t.Fatalf("pod %s: reasons cover %d of %d nodes: %v", p.Name, sum, s.g.NumNodes(), r.Diagnosis)
	}
	ex, err := s.Explain(context.Background(), p, 1)
	if err != nil {
		t.Fatal(err)
	}
	if ex.Feasible != 0 {
		t.Fatalf("pod %s reported unschedulable but %d nodes are feasible", p.Name, ex.Feasible)
	}
}
