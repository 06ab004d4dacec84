package global

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/sluice-dev/sluice/api"
)

func cluster(name, region string, stable int, share float64) Cluster {
	return Cluster{Name: name, Labels: map[string]string{RegionLabel: region, "tier": "prod"}, StablePods: stable, RequestShare: share}
}

var fleet = []Cluster{
	cluster("eu-1", "eu", 8, 0.3),
	cluster("eu-2", "eu", 3, 0.1),
	cluster("eu-3", "eu", 5, 0.2),
	cluster("us-1", "us", 6, 0.2),
	cluster("us-2", "us", 2, 0.2),
	cluster("ap-1", "ap", 4, 0.0),
	{Name: "staging", Labels: map[string]string{RegionLabel: "eu", "tier": "staging"}},
}

func mustSelector(t *testing.T, s string) labels.Selector {
	t.Helper()
	sel, err := labels.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return sel
}

func mustWaves(t *testing.T, s string) []api.WaveSize {
	t.Helper()
	w, err := api.ParseWaves(s)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestPlanOrdersByBlastRadiusThenRegions: the first wave is the cluster
// with the fewest stable pods; later waves take one cluster per region in
// turn, so no region is emptied before every other region has started.
func TestPlanOrdersByBlastRadiusThenRegions(t *testing.T) {
	waves, err := Plan(fleet, mustSelector(t, "tier=prod"), mustWaves(t, "1,50%,100%"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range waves {
		got = append(got, strings.Join(w.Clusters, " "))
	}
	// us-2 (2 pods) first; then regions in the order of their smallest
	// cluster (us, eu, ap), each region's smallest first.
	want := []string{"us-2", "eu-2 ap-1", "us-1 eu-3 eu-1"}
	if strings.Join(got, " | ") != strings.Join(want, " | ") {
		t.Errorf("waves %q, want %q", got, want)
	}
	if waves[0].Reason != "wave 1: us-2 (smallest: 2 of 28 stable pods)" {
		t.Errorf("first reason %q", waves[0].Reason)
	}
	if waves[1].Reason != "wave 2: eu-2, ap-1 (regions ap, eu, smallest first)" {
		t.Errorf("second reason %q", waves[1].Reason)
	}
	for _, w := range waves {
		for _, c := range w.Clusters {
			if c == "staging" {
				t.Errorf("the selector tier=prod let staging in: %v", waves)
			}
		}
	}
}

// TestPlanNoRegionEmptiedFirst: with two regions of unequal size, every
// prefix of the order that takes all of a region's clusters has already
// reached every other region.
func TestPlanNoRegionEmptiedFirst(t *testing.T) {
	req := &Request{Selector: mustSelector(t, "tier=prod")}
	candidates, _ := defaultPlanner.filter(req, fleet)
	order := spreadRegions(defaultPlanner.rank(req, candidates))
	left := map[string]int{}
	for _, c := range order {
		left[c.region()]++
	}
	started := map[string]bool{}
	for _, c := range order {
		started[c.region()] = true
		left[c.region()]--
		if left[c.region()] == 0 {
			for r := range left {
				if !started[r] {
					t.Fatalf("region %s emptied (at %s) before region %s started: %v", c.region(), c.Name, r, names(order))
				}
			}
		}
	}
}

func TestPlanErrors(t *testing.T) {
	if _, err := Plan(fleet, mustSelector(t, "region in (mars)"), mustWaves(t, "")); err == nil || !strings.Contains(err.Error(), `no cluster matches "region in (mars)"`) {
		t.Errorf("empty selection: %v", err)
	}
}

// TestPlanSmallSelection: a percentage rounds up and a wave that adds no
// cluster is dropped.
func TestPlanSmallSelection(t *testing.T) {
	two := []Cluster{cluster("a", "eu", 1, 0), cluster("b", "us", 5, 0)}
	waves, err := Plan(two, labels.Everything(), mustWaves(t, "1,50%,100%"))
	if err != nil {
		t.Fatal(err)
	}
	if len(waves) != 2 || waves[0].Clusters[0] != "a" || waves[1].Clusters[0] != "b" {
		t.Errorf("waves %+v; want [a] then [b]", waves)
	}
}
