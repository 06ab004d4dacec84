package global

import (
	"cmp"
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
	// requests (0..1). Both measure the blast radius of a bad version.
	StablePods   int
	RequestShare float64
}

func (c Cluster) region() string { return c.Labels[RegionLabel] }

// Wave is one wave of a plan: its clusters, in order, and why.
type Wave struct {
	Clusters []string
	Reason   string
}

// Plan orders the clusters that selector selects into waves of the given
// sizes. It is an error when the selector selects no cluster.
func Plan(clusters []Cluster, selector labels.Selector, sizes []api.WaveSize) ([]Wave, error) {
	selected := filter(clusters, selector)
	if len(selected) == 0 {
		return nil, fmt.Errorf("no cluster matches %q (clusters: %s)", selector, strings.Join(names(clusters), ", "))
	}
	ordered := order(selected)
	var waves []Wave
	done := 0
	for _, size := range sizes {
		upTo := size.UpTo(len(ordered))
		if upTo <= done {
			continue // a wave that adds no cluster at this count
		}
		wave := ordered[done:upTo]
		waves = append(waves, Wave{Clusters: names(wave), Reason: reason(len(waves)+1, wave, selected, done == 0)})
		done = upTo
	}
	return waves, nil
}

// filter keeps the clusters the selector matches (the cluster-level filter
// plugin).
func filter(clusters []Cluster, selector labels.Selector) []Cluster {
	var out []Cluster
	for _, c := range clusters {
		if selector.Matches(labels.Set(c.Labels)) {
			out = append(out, c)
		}
	}
	return out
}

// smaller orders by blast radius: fewer stable pods, then a lower request
// share, then the name (a stable order).
func smaller(a, b Cluster) int {
	return cmp.Or(cmp.Compare(a.StablePods, b.StablePods), cmp.Compare(a.RequestShare, b.RequestShare), strings.Compare(a.Name, b.Name))
}

// order puts the smallest cluster first, then takes one cluster per
// region in turn (each region's smallest first; regions in the order of
// their smallest cluster), so that every region has had a cluster before
// any region has had two, and a region's last cluster comes only after
// every other region has started.
func order(clusters []Cluster) []Cluster {
	sorted := slices.Clone(clusters)
	slices.SortFunc(sorted, smaller)
	byRegion := map[string][]Cluster{}
	var regions []string
	for _, c := range sorted {
		if _, ok := byRegion[c.region()]; !ok {
			regions = append(regions, c.region())
		}
		byRegion[c.region()] = append(byRegion[c.region()], c)
	}
	out := make([]Cluster, 0, len(sorted))
	for len(out) < len(sorted) {
		for _, r := range regions {
			if q := byRegion[r]; len(q) > 0 {
				out = append(out, q[0])
				byRegion[r] = q[1:]
			}
		}
	}
	return out
}

// reason says why a wave holds its clusters.
func reason(n int, wave, selected []Cluster, first bool) string {
	if first && len(wave) == 1 {
		total := 0
		for _, c := range selected {
			total += c.StablePods
		}
		return fmt.Sprintf("wave %d: %s (smallest: %d of %d stable pods)", n, wave[0].Name, wave[0].StablePods, total)
	}
	regions := map[string]bool{}
	for _, c := range wave {
		regions[regionName(c)] = true
	}
	return fmt.Sprintf("wave %d: %s (regions %s, smallest first)", n, strings.Join(names(wave), ", "), strings.Join(slices.Sorted(maps.Keys(regions)), ", "))
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
