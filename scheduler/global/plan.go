package global

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/sluice-dev/sluice/api"
)

// RegionLabel is the cluster label that names a cluster's region.
const RegionLabel = "region"

// Cluster is what the global layer knows of one cluster for one rollout.
type Cluster struct {
	Name   string
	Labels map[string]string
	// StablePods is how many Ready pods of the rollout's stable version
	// the cluster runs; RequestShare its observed share of the rollout's
	// requests (0..1), used only when RequestShareKnown. Both measure the
	// blast radius of a bad version.
	StablePods        int
	RequestShare      float64
	RequestShareKnown bool
	// Unreachable says why the cluster cannot be reached ("cluster eu-2
	// unreachable since 12:03:04: ..."); "" when it can.
	Unreachable string
}

func (c Cluster) region() string { return c.Labels[RegionLabel] }

// Wave is one wave of a plan: its clusters, in order, and why.
type Wave struct {
	Clusters []string
	Reason   string
}

// Plan orders the clusters that selector selects into waves of the given
// sizes, with the default cluster plugins (DefaultPlugins). It is an
// error when no cluster passes the filters.
func Plan(clusters []Cluster, selector labels.Selector, sizes []api.WaveSize) ([]Wave, error) {
	return defaultPlanner.Plan(clusters, selector, sizes)
}

// Plan orders the clusters that pass p's filters for selector into waves
// of the given sizes: ranked by p's score plugins, then spread over
// regions (spreadRegions). It is an error when no cluster passes.
func (p *Planner) Plan(clusters []Cluster, selector labels.Selector, sizes []api.WaveSize) ([]Wave, error) {
	req := &Request{Selector: selector}
	candidates, rejected := p.filter(req, clusters)
	if len(candidates) == 0 {
		return nil, noCluster(req, clusters, rejected)
	}
	ordered := spreadRegions(p.rank(req, candidates))
	var waves []Wave
	done := 0
	for _, size := range sizes {
		upTo := size.UpTo(len(ordered))
		if upTo <= done {
			continue // a wave that adds no cluster at this count
		}
		wave := ordered[done:upTo]
		waves = append(waves, Wave{Clusters: names(wave), Reason: p.reason(req, len(waves)+1, wave, candidates)})
		done = upTo
	}
	return waves, nil
}

// reason says why wave n holds its clusters: for a first wave of one
// cluster, what the score plugins say of it; else the region spread.
func (p *Planner) reason(req *Request, n int, wave, candidates []Cluster) string {
	why := spreadReason(wave)
	if n == 1 && len(wave) == 1 {
		why = firstReason(p.explain(req, &wave[0], candidates))
	}
	return fmt.Sprintf("wave %d: %s (%s)", n, strings.Join(names(wave), ", "), why)
}

// spreadRegions keeps the first-ranked cluster first, then takes one
// cluster per region in turn (each region's clusters in rank order;
// regions in the order of their first-ranked cluster), so that every
// region has had a cluster before any region has had two, and a region's
// last cluster comes only after every other region has started. It is
// not a plugin: it orders the whole list, where a score plugin looks at
// one cluster.
func spreadRegions(ranked []Cluster) []Cluster {
	byRegion := map[string][]Cluster{}
	var regions []string
	for _, c := range ranked {
		if _, ok := byRegion[c.region()]; !ok {
			regions = append(regions, c.region())
		}
		byRegion[c.region()] = append(byRegion[c.region()], c)
	}
	out := make([]Cluster, 0, len(ranked))
	for len(out) < len(ranked) {
		for _, r := range regions {
			if q := byRegion[r]; len(q) > 0 {
				out = append(out, q[0])
				byRegion[r] = q[1:]
			}
		}
	}
	return out
}

// firstReason says why a first wave of one cluster holds it: what the
// score plugins said of it.
func firstReason(explained []string) string {
	if len(explained) == 0 {
		return "first by name"
	}
	return strings.Join(explained, ", ")
}

// spreadReason says why a wave of several clusters, or a later wave,
// holds its clusters.
func spreadReason(wave []Cluster) string {
	regions := map[string]bool{}
	for _, c := range wave {
		regions[regionName(c)] = true
	}
	return fmt.Sprintf("regions %s, smallest first", strings.Join(slices.Sorted(maps.Keys(regions)), ", "))
}

func regionName(c Cluster) string {
	if r := c.region(); r != "" {
		return r
	}
	return "(no region)"
}

func names(cs []Cluster) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Name
	}
	return out
}
