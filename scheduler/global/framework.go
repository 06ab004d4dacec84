package global

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/sluice-dev/sluice/scheduler"
)

// The cluster layer decides with the graph scheduler's plugin framework,
// one layer up: clusters are what filter and score plugins look at (the
// graph's nodes), a Request is what is placed (the graph's pod). Plugins
// are scheduler.Plugin values with a name, rejections are
// *scheduler.Status (nil accepts), a profile is a list of
// scheduler.PluginConfig built from a Registry. Two things differ, on
// purpose:
//
//   - Score plugins rank in profile order, each breaking the ties of the
//     ones before it, instead of adding weighted normalised scores: the
//     policy is "fewest stable pods, then lowest request share", and a
//     sum would let a share outweigh pods. PluginConfig.Weight must be 0.
//   - Factories get no scheduler.Handle: a cluster plugin has no graph
//     and no cycle state (a plan is a handful of clusters, planned once
//     per version), so the Registry is the layer's own.

// Request is what one plan is for: the rollout's cluster selector (its
// sluice.io/clusters annotation).
type Request struct {
	Selector labels.Selector
}

// FilterPlugin decides whether a rollout may run in a cluster: nil
// accepts, a rejection says why.
type FilterPlugin interface {
	scheduler.Plugin
	Filter(req *Request, c *Cluster) *scheduler.Status
}

// ScorePlugin ranks the clusters that passed every filter: a higher
// score plans a cluster earlier. Explain says, for the first wave's
// reason, what this plugin knows of first among the candidates ("" when
// it has nothing to say).
type ScorePlugin interface {
	scheduler.Plugin
	Score(req *Request, c *Cluster) int64
	Explain(req *Request, first *Cluster, candidates []Cluster) string
}

// PluginFactory builds a cluster plugin from its typed args (nil means
// defaults).
type PluginFactory func(args any) (scheduler.Plugin, error)

// Registry maps cluster plugin names to factories.
type Registry map[string]PluginFactory

// Planner orders clusters into waves with one profile of cluster plugins.
type Planner struct {
	filters []FilterPlugin
	scores  []ScorePlugin
}

// NewPlanner builds the plugins of cfg from reg. The ClusterSelector
// filter must be enabled: without it a rollout's sluice.io/clusters would
// be ignored.
func NewPlanner(reg Registry, cfg []scheduler.PluginConfig) (*Planner, error) {
	p := &Planner{}
	seen := map[string]bool{}
	for _, pc := range cfg {
		if seen[pc.Name] {
			return nil, fmt.Errorf("cluster plugin %s enabled twice", pc.Name)
		}
		seen[pc.Name] = true
		factory, ok := reg[pc.Name]
		if !ok {
			return nil, fmt.Errorf("cluster plugin %s: not in registry", pc.Name)
		}
		if pc.Weight != 0 {
			return nil, fmt.Errorf("cluster plugin %s: weight %d: cluster score plugins rank in profile order, each breaking the ties of the ones before it; leave the weight 0", pc.Name, pc.Weight)
		}
		pl, err := factory(pc.Args)
		if err != nil {
			return nil, fmt.Errorf("cluster plugin %s: %w", pc.Name, err)
		}
		if pl.Name() != pc.Name {
			return nil, fmt.Errorf("cluster plugin %s: factory built %s", pc.Name, pl.Name())
		}
		f, isFilter := pl.(FilterPlugin)
		s, isScore := pl.(ScorePlugin)
		if !isFilter && !isScore {
			return nil, fmt.Errorf("cluster plugin %s: neither a filter nor a score plugin", pc.Name)
		}
		if isFilter {
			p.filters = append(p.filters, f)
		}
		if isScore {
			p.scores = append(p.scores, s)
		}
	}
	if !seen[ClusterSelectorName] {
		return nil, fmt.Errorf("cluster plugin %s must be enabled: without it a rollout's %s would be ignored", ClusterSelectorName, "sluice.io/clusters")
	}
	return p, nil
}

// defaultPlanner is the planner of DefaultPlugins, which always builds.
var defaultPlanner = func() *Planner {
	p, err := NewPlanner(NewInTreeRegistry(), DefaultPlugins())
	if err != nil {
		panic(err)
	}
	return p
}()

// rejection is one cluster a filter rejected.
type rejection struct {
	cluster string
	status  *scheduler.Status
}

// filter keeps the clusters every filter accepts, in their order, and
// says why each other one was rejected (its first filter's rejection).
func (p *Planner) filter(req *Request, clusters []Cluster) ([]Cluster, []rejection) {
	var passed []Cluster
	var rejected []rejection
	for i := range clusters {
		if st := p.firstRejection(req, &clusters[i]); st != nil {
			rejected = append(rejected, rejection{cluster: clusters[i].Name, status: st})
			continue
		}
		passed = append(passed, clusters[i])
	}
	return passed, rejected
}

func (p *Planner) firstRejection(req *Request, c *Cluster) *scheduler.Status {
	for _, f := range p.filters {
		if st := f.Filter(req, c); st != nil {
			if st.Plugin() == "" {
				st = st.WithPlugin(f.Name())
			}
			return st
		}
	}
	return nil
}

// rank orders the candidates by the score plugins in profile order (the
// first decides, each next one breaks the ties left), then by name.
func (p *Planner) rank(req *Request, candidates []Cluster) []Cluster {
	type scored struct {
		c      Cluster
		scores []int64
	}
	all := make([]scored, len(candidates))
	for i, c := range candidates {
		all[i] = scored{c: c, scores: make([]int64, len(p.scores))}
		for j, s := range p.scores {
			all[i].scores[j] = s.Score(req, &all[i].c)
		}
	}
	slices.SortFunc(all, func(a, b scored) int {
		// Higher first: b before a.
		return cmp.Or(slices.Compare(b.scores, a.scores), strings.Compare(a.c.Name, b.c.Name))
	})
	out := make([]Cluster, len(all))
	for i, s := range all {
		out[i] = s.c
	}
	return out
}

// explain is what the score plugins say of the first cluster.
func (p *Planner) explain(req *Request, first *Cluster, candidates []Cluster) []string {
	var out []string
	for _, s := range p.scores {
		if e := s.Explain(req, first, candidates); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// noCluster is the error of a plan that no cluster passes: the selector's
// own when it matched none, else the other filters' reasons.
func noCluster(req *Request, clusters []Cluster, rejected []rejection) error {
	var others []string
	for _, r := range rejected {
		if r.status.Plugin() != ClusterSelectorName {
			others = append(others, r.cluster+": "+r.status.Plugin()+": "+r.status.Reason())
		}
	}
	if len(others) == 0 {
		return fmt.Errorf("no cluster matches %q (clusters: %s)", req.Selector, strings.Join(names(clusters), ", "))
	}
	return fmt.Errorf("no cluster that matches %q passes the cluster filters (%s)", req.Selector, strings.Join(others, "; "))
}
