package plan

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/scheduler"
)

// Options says what to plan.
type Options struct {
	Cluster *Cluster
	Rollout *api.Rollout
	// Replicas is how many canary pods to place (0: the rollout's
	// replicas), at most api.MaxReplicas.
	Replicas int32
	// Baseline also places as many baseline pods, matched to the canary.
	Baseline bool
	// Explain names a pod to explain (its name as printed, e.g.
	// default/checkout-canary-3); it is explained just before it would be
	// scheduled. Empty: no explanation.
	Explain string
	// TopN is how many nodes the explanation scores (default 5).
	TopN int
	// Seed fixes tie-breaking.
	Seed uint64
	// DomainKey and MaxSkew configure failure-domain isolation; Critical
	// lists services whose domains to avoid.
	DomainKey string
	MaxSkew   int32
	Critical  []string
	// DependsOn adds dependencies to those in the pod template.
	DependsOn []string
	// Weights override score plugin weights by plugin name; 0 disables.
	Weights                  map[string]int64
	PercentageOfNodesToScore int32
}

// Report is the plan: where each pod goes, what could not be placed, and
// per-domain counts with the skew for each group.
type Report struct {
	Rollout       string                 `json:"rollout"`
	Nodes         int                    `json:"nodes"`
	TopologyKeys  []string               `json:"topologyKeys"`
	DomainKey     string                 `json:"domainKey"`
	MaxSkew       int32                  `json:"maxSkew"`
	Placements    []Placement            `json:"placements"`
	Unschedulable []Unplaced             `json:"unschedulable,omitempty"`
	Domains       []GroupDomains         `json:"domains"`
	Explain       *scheduler.Explanation `json:"explain,omitempty"`
}

// Placement is one placed pod.
type Placement struct {
	Pod  string         `json:"pod"`
	Role scheduler.Role `json:"role"`
	Node string         `json:"node"`
	// Domains are the node's topology values, one per topology key.
	Domains []string `json:"domains"`
	Type    string   `json:"type,omitempty"`
}

// Unplaced is a pod no node could take, with the reasons.
type Unplaced struct {
	Pod       string               `json:"pod"`
	Role      scheduler.Role       `json:"role"`
	Reason    string               `json:"reason"`
	Diagnosis *scheduler.Diagnosis `json:"diagnosis,omitempty"`
}

// GroupDomains is a group's pod count per failure domain and its skew:
// largest minus smallest count over the domains not avoided (those that
// host a critical service).
type GroupDomains struct {
	Group   string                  `json:"group"`
	Counts  []scheduler.DomainCount `json:"counts"`
	Avoided []string                `json:"avoided,omitempty"`
	Skew    int                     `json:"skew"`
}

// ErrExplainNotFound means Options.Explain names no planned pod.
var ErrExplainNotFound = errors.New("no such pod in the plan")

// Run places the rollout's pods on the cluster.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Cluster == nil || o.Rollout == nil {
		return nil, errors.New("plan: cluster and rollout are required")
	}
	n := o.Replicas
	if n == 0 {
		n = o.Rollout.Replicas
	}
	if n < 0 {
		return nil, fmt.Errorf("plan: replicas %d is negative", n)
	}
	if n > api.MaxReplicas {
		// The plan holds every pod (and its placement or diagnosis) in
		// memory: the cap bounds it.
		return nil, fmt.Errorf("plan: replicas %d is more than the maximum of %d", n, api.MaxReplicas)
	}
	pods, err := PodsFor(o.Rollout, n, o.Baseline, o.DependsOn)
	if err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	if o.Explain != "" && !slices.ContainsFunc(pods, func(p scheduler.Pod) bool { return p.Name == o.Explain }) {
		return nil, fmt.Errorf("plan: explain %s: %w", o.Explain, ErrExplainNotFound)
	}
	s, fd, err := newScheduler(o)
	if err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	defer s.Close()
	if err := s.Update(func(g *scheduler.Graph) error { return load(g, o.Cluster) }); err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	rep := &Report{Rollout: o.Rollout.Key.String(), TopologyKeys: topologyKeys(o.Cluster), DomainKey: fd.TopologyKey, MaxSkew: fd.MaxSkew}
	topN := o.TopN
	if topN <= 0 {
		topN = 5
	}
	for i := range pods {
		p := &pods[i]
		if p.Name == o.Explain {
			if rep.Explain, err = s.Explain(ctx, p, topN); err != nil {
				return nil, fmt.Errorf("plan: %w", err)
			}
		}
		r := s.ScheduleOne(ctx, p)
		switch {
		case r.Status == nil:
			rep.Placements = append(rep.Placements, Placement{Pod: p.Name, Role: p.Role, Node: r.Node})
		case r.Status.IsRejected():
			rep.Unschedulable = append(rep.Unschedulable, Unplaced{Pod: p.Name, Role: p.Role, Reason: r.Status.Reason(), Diagnosis: r.Diagnosis})
		default:
			return nil, fmt.Errorf("plan: schedule %s: %w", p.Name, r.Status.AsError())
		}
	}
	err = s.Update(func(g *scheduler.Graph) error {
		rep.Nodes = g.NumNodes()
		for i := range rep.Placements {
			pl := &rep.Placements[i]
			ns, _ := g.Node(pl.Node)
			pl.Domains, pl.Type = ns.Domains, ns.Type
		}
		groups := []string{canaryGroup(o.Rollout)}
		if o.Baseline {
			groups = append(groups, baselineGroup(o.Rollout))
		}
		avoided := map[string]bool{}
		for _, c := range fd.CriticalServices {
			counts, err := g.DomainCounts(c, fd.TopologyKey)
			if err != nil {
				return err
			}
			for _, dc := range counts {
				avoided[dc.Domain] = avoided[dc.Domain] || dc.Count > 0
			}
		}
		for _, grp := range groups {
			counts, err := g.DomainCounts(grp, fd.TopologyKey)
			if err != nil {
				return err
			}
			gd := GroupDomains{Group: grp, Counts: counts}
			var eligible []scheduler.DomainCount
			for _, dc := range counts {
				if avoided[dc.Domain] {
					gd.Avoided = append(gd.Avoided, dc.Domain)
				} else {
					eligible = append(eligible, dc)
				}
			}
			gd.Skew = skew(eligible)
			rep.Domains = append(rep.Domains, gd)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("plan: %w", err)
	}
	return rep, nil
}

func topologyKeys(c *Cluster) []string {
	if len(c.TopologyKeys) > 0 {
		return c.TopologyKeys
	}
	return []string{scheduler.LabelRegion, scheduler.LabelZone}
}

// newScheduler builds a scheduler with the plan's plugin settings and
// returns the failure-domain args in effect.
func newScheduler(o Options) (*scheduler.Scheduler, scheduler.FailureDomainArgs, error) {
	fd := scheduler.FailureDomainArgs{TopologyKey: o.DomainKey, MaxSkew: o.MaxSkew, CriticalServices: o.Critical}
	if fd.TopologyKey == "" {
		fd.TopologyKey = scheduler.LabelZone
		if keys := topologyKeys(o.Cluster); !slices.Contains(keys, fd.TopologyKey) {
			fd.TopologyKey = keys[len(keys)-1]
		}
	}
	if fd.MaxSkew == 0 {
		fd.MaxSkew = 1
	}
	var plugins []scheduler.PluginConfig
	known := map[string]bool{}
	for _, pc := range scheduler.DefaultPlugins() {
		known[pc.Name] = true
		if pc.Name == scheduler.FailureDomainName {
			pc.Args = &fd
		}
		if w, ok := o.Weights[pc.Name]; ok {
			if w == 0 {
				continue // weight 0 turns the score off
			}
			pc.Weight = w
		}
		plugins = append(plugins, pc)
	}
	for name := range o.Weights {
		if !known[name] {
			return nil, fd, fmt.Errorf("weight for unknown plugin %q", name)
		}
	}
	// The clock is fixed: a plan is a snapshot (so heat does not decay
	// while it is made), and the output must not depend on when it runs.
	now := time.Unix(0, 0)
	s, err := scheduler.New(scheduler.Options{
		Graph:                    scheduler.GraphOptions{TopologyKeys: topologyKeys(o.Cluster)},
		Plugins:                  plugins,
		Seed:                     o.Seed,
		PercentageOfNodesToScore: o.PercentageOfNodesToScore,
		Clock:                    func() time.Time { return now },
	})
	return s, fd, err
}

func load(g *scheduler.Graph, c *Cluster) error {
	for _, n := range c.Nodes {
		if err := g.AddNode(n.node()); err != nil {
			return err
		}
	}
	for _, p := range c.Pods {
		pod := scheduler.Pod{Name: p.Name, Service: p.Service, Requests: scheduler.Resources{MilliCPU: milli(p.CPU), Memory: value(p.Memory)}}
		if err := g.AddPod(&pod, p.Node); err != nil {
			return err
		}
	}
	return nil
}

func skew(counts []scheduler.DomainCount) int {
	if len(counts) == 0 {
		return 0
	}
	lo, hi := counts[0].Count, counts[0].Count
	for _, c := range counts[1:] {
		lo, hi = min(lo, c.Count), max(hi, c.Count)
	}
	return hi - lo
}
