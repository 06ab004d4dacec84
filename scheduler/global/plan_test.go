package global

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/scheduler"
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

func waveList(waves []Wave) string {
	var out []string
	for _, w := range waves {
		out = append(out, strings.Join(w.Clusters, " "))
	}
	return strings.Join(out, " | ")
}

func shared(c Cluster, share float64) Cluster {
	c.RequestShare, c.RequestShareKnown = share, true
	return c
}

// TestPlanRequestShareBreaksTies: at equal stable pods the cluster with
// the lower observed request share goes first, and the first wave's
// reason says its share; without a known share the name decides and the
// reason is as before.
func TestPlanRequestShareBreaksTies(t *testing.T) {
	three := []Cluster{
		shared(cluster("eu-1", "eu", 3, 0), 0.5),
		shared(cluster("eu-2", "eu", 3, 0), 0.1),
		shared(cluster("us-1", "us", 18, 0), 0.4),
	}
	waves, err := Plan(three, labels.Everything(), mustWaves(t, "1,100%"))
	if err != nil {
		t.Fatal(err)
	}
	if got := waveList(waves); got != "eu-2 | us-1 eu-1" {
		t.Errorf("waves %q, want eu-2 first (10 %% of requests against eu-1's 50 %%)", got)
	}
	if want := "wave 1: eu-2 (smallest: 3 of 24 stable pods, 10 % of requests)"; waves[0].Reason != want {
		t.Errorf("reason %q, want %q", waves[0].Reason, want)
	}
	// Fewer stable pods win over a lower share.
	three[0].StablePods = 2
	waves, _ = Plan(three, labels.Everything(), mustWaves(t, "1,100%"))
	if want := "wave 1: eu-1 (smallest: 2 of 23 stable pods, 50 % of requests)"; waves[0].Reason != want {
		t.Errorf("reason %q, want %q", waves[0].Reason, want)
	}
	// Shares not known: the name breaks the tie.
	for i := range three {
		three[i].RequestShareKnown = false
	}
	three[0].StablePods = 3
	waves, _ = Plan(three, labels.Everything(), mustWaves(t, "1,100%"))
	if want := "wave 1: eu-1 (smallest: 3 of 24 stable pods)"; waves[0].Reason != want {
		t.Errorf("reason %q, want %q", waves[0].Reason, want)
	}
}

// TestPlanUnreachableLast: by default an unreachable cluster keeps its
// place in the plan (its part holds until it is back) but never leads:
// its pods cannot be read, so it looks empty, and wave 1 would hold every
// cluster until it is back.
func TestPlanUnreachableLast(t *testing.T) {
	three := []Cluster{cluster("eu-1", "eu", 4, 0), cluster("eu-2", "eu", 0, 0), cluster("us-1", "us", 6, 0)}
	three[1].Unreachable = "cluster eu-2 unreachable since 12:03:04: connection refused"
	waves, err := Plan(three, labels.Everything(), mustWaves(t, "1,100%"))
	if err != nil {
		t.Fatal(err)
	}
	if got := waveList(waves); got != "eu-1 | us-1 eu-2" {
		t.Errorf("waves %q, want eu-1 first and eu-2 still planned", got)
	}
	if want := "wave 1: eu-1 (eu-2 unreachable, smallest: 4 of 10 stable pods)"; waves[0].Reason != want {
		t.Errorf("reason %q, want %q", waves[0].Reason, want)
	}
	// Every cluster unreachable: still a plan, by the other plugins.
	three[0].Unreachable, three[2].Unreachable = "down", "down"
	waves, _ = Plan(three, labels.Everything(), mustWaves(t, "1,100%"))
	if got := waveList(waves); got != "eu-2 | us-1 eu-1" {
		t.Errorf("all unreachable: waves %q, want the smallest first", got)
	}
}

// TestPlanReachableFilter: a profile with the Reachable filter leaves
// unreachable clusters out of the plan, and says so when none is left.
func TestPlanReachableFilter(t *testing.T) {
	p, err := NewPlanner(NewInTreeRegistry(), append(DefaultPlugins(), scheduler.PluginConfig{Name: ReachableName}))
	if err != nil {
		t.Fatal(err)
	}
	three := []Cluster{cluster("eu-1", "eu", 4, 0), cluster("eu-2", "eu", 0, 0), cluster("us-1", "us", 6, 0)}
	three[1].Unreachable = "cluster eu-2 unreachable since 12:03:04"
	waves, err := p.Plan(three, labels.Everything(), mustWaves(t, "1,100%"))
	if err != nil {
		t.Fatal(err)
	}
	if got := waveList(waves); got != "eu-1 | us-1" {
		t.Errorf("waves %q, want eu-2 left out", got)
	}
	if want := "wave 1: eu-1 (smallest: 4 of 10 stable pods)"; waves[0].Reason != want {
		t.Errorf("reason %q, want %q", waves[0].Reason, want)
	}
	three[0].Unreachable = "cluster eu-1 unreachable since 12:04:05"
	_, err = p.Plan(three, mustSelector(t, "region=eu"), mustWaves(t, ""))
	want := `no cluster that matches "region=eu" passes the cluster filters (eu-1: Reachable: cluster eu-1 unreachable since 12:04:05; eu-2: Reachable: cluster eu-2 unreachable since 12:03:04)`
	if err == nil || err.Error() != want {
		t.Errorf("all selected unreachable: %v\nwant %s", err, want)
	}
	// The selector's error stays the selector's.
	if _, err := p.Plan(three, mustSelector(t, "region=ap"), mustWaves(t, "")); err == nil || !strings.HasPrefix(err.Error(), `no cluster matches "region=ap" (clusters: eu-1, eu-2, us-1)`) {
		t.Errorf("nothing selected: %v", err)
	}
}

// TestPlanProfileOrder: score plugins rank in profile order, so a
// profile that puts the request share first lets it decide; with no score
// plugin the name does.
func TestPlanProfileOrder(t *testing.T) {
	two := []Cluster{shared(cluster("a", "eu", 1, 0), 0.6), shared(cluster("b", "eu", 5, 0), 0.2)}
	for _, tc := range []struct {
		profile []string
		want    string
	}{
		{[]string{ClusterSelectorName, FewestStablePodsName, LowestRequestShareName}, "wave 1: a (smallest: 1 of 6 stable pods, 60 % of requests)"},
		{[]string{ClusterSelectorName, LowestRequestShareName, FewestStablePodsName}, "wave 1: b (20 % of requests, smallest: 5 of 6 stable pods)"},
		{[]string{ClusterSelectorName}, "wave 1: a (first by name)"},
	} {
		var cfg []scheduler.PluginConfig
		for _, n := range tc.profile {
			cfg = append(cfg, scheduler.PluginConfig{Name: n})
		}
		p, err := NewPlanner(NewInTreeRegistry(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		waves, err := p.Plan(two, labels.Everything(), mustWaves(t, "1,100%"))
		if err != nil {
			t.Fatal(err)
		}
		if waves[0].Reason != tc.want {
			t.Errorf("profile %v: %q, want %q", tc.profile, waves[0].Reason, tc.want)
		}
	}
}
