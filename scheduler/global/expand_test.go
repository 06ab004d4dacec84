package global

import (
	"slices"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/api"
)

func placed(name, selector string, policy string) *api.Rollout {
	waves, _ := api.ParseWaves("1,100%")
	return &api.Rollout{Key: api.Key{Namespace: "shop", Name: name}, File: name + ".yaml", Line: 4, Version: "v2",
		Workload:  &api.Workload{PodTemplateHash: "h2"},
		Placement: &api.Placement{Clusters: selector, Waves: waves, OnWaveFailure: policy}}
}

var threeClusters = []Cluster{
	{Name: "eu-1", Labels: map[string]string{"region": "eu"}, StablePods: 9},
	{Name: "eu-2", Labels: map[string]string{"region": "eu"}, StablePods: 3},
	{Name: "us-1", Labels: map[string]string{"region": "us"}, StablePods: 6},
}

func noSeats(api.Key, string, string) *api.WaveSeat { return nil }

func TestExpand(t *testing.T) {
	home := &api.Rollout{Key: api.Key{Namespace: "shop", Name: "cart"}}
	set := &api.Set{Rollouts: []*api.Rollout{home, placed("web", "region in (eu,us)", api.OnWaveFailureRollbackAll)}}
	out := Expand(set, func(*api.Rollout) []Cluster { return threeClusters }, noSeats)
	if len(set.Rollouts) != 2 {
		t.Fatal("Expand changed its input")
	}
	var got []string
	for _, r := range out.Rollouts {
		if r.Wave == nil {
			got = append(got, r.Key.String())
			continue
		}
		got = append(got, r.Key.String()+":"+itoa(r.Wave.Wave)+"/"+itoa(r.Wave.Waves)+holdMark(r.Wave))
	}
	want := "shop/cart shop/web@eu-1:2/2 shop/web@eu-2:1/2+hold shop/web@us-1:2/2"
	if strings.Join(got, " ") != want {
		t.Errorf("parts:\n got %s\nwant %s", strings.Join(got, " "), want)
	}
	if r := out.Rollout(api.Key{Namespace: "shop", Name: "web@eu-2"}); r == nil || r.Wave.Reason != "wave 1: eu-2 (smallest: 3 of 18 stable pods)" || r.File != "web.yaml" {
		t.Errorf("eu-2's part: %+v", r)
	}
}

func TestExpandHoldPolicyNeverHolds(t *testing.T) {
	out := Expand(&api.Set{Rollouts: []*api.Rollout{placed("web", "region=eu", api.OnWaveFailureHold)}}, func(*api.Rollout) []Cluster { return threeClusters }, noSeats)
	for _, r := range out.Rollouts {
		if r.Wave.HoldAtFull {
			t.Errorf("%s holds at full with on-wave-failure hold", r.Key)
		}
	}
}

// TestExpandKeepsSeats: a version already seated keeps its plan, even if
// the facts would now order the clusters otherwise.
func TestExpandKeepsSeats(t *testing.T) {
	seats := map[string]*api.WaveSeat{
		"shop/web@eu-1": {Cluster: "eu-1", Wave: 1, Waves: 2, Reason: "wave 1: eu-1 (smallest: 1 of 9 stable pods)"},
		"shop/web@eu-2": {Cluster: "eu-2", Wave: 2, Waves: 2},
		"shop/web@us-1": {Cluster: "us-1", Wave: 2, Waves: 2},
	}
	lookup := func(k api.Key, version, hash string) *api.WaveSeat {
		if version != "v2" || hash != "h2" {
			return nil
		}
		return seats[k.String()]
	}
	out := Expand(&api.Set{Rollouts: []*api.Rollout{placed("web", "region in (eu,us)", api.OnWaveFailureRollbackAll)}}, func(*api.Rollout) []Cluster { return threeClusters }, lookup)
	if r := out.Rollout(api.Key{Namespace: "shop", Name: "web@eu-1"}); r == nil || r.Wave.Wave != 1 || !r.Wave.HoldAtFull {
		t.Errorf("eu-1 should keep wave 1: %+v", r.Wave)
	}
	// One cluster without a seat (it joined the selection): a new plan.
	delete(seats, "shop/web@us-1")
	out = Expand(&api.Set{Rollouts: []*api.Rollout{placed("web", "region in (eu,us)", api.OnWaveFailureRollbackAll)}}, func(*api.Rollout) []Cluster { return threeClusters }, lookup)
	if r := out.Rollout(api.Key{Namespace: "shop", Name: "web@eu-2"}); r == nil || r.Wave.Wave != 1 {
		t.Errorf("a new plan puts eu-2 (smallest) first: %+v", r.Wave)
	}
}

func TestExpandNoClusterHolds(t *testing.T) {
	out := Expand(&api.Set{Rollouts: []*api.Rollout{placed("web", "region=ap", api.OnWaveFailureRollbackAll)}}, func(*api.Rollout) []Cluster { return threeClusters }, noSeats)
	if len(out.Rollouts) != 0 || len(out.Rejected) != 1 {
		t.Fatalf("rollouts %d rejected %d", len(out.Rollouts), len(out.Rejected))
	}
	if d := out.Rejected[0].Diagnostics[0].String(); !strings.Contains(d, `web.yaml:4: metadata.annotations[sluice.io/clusters]: no cluster matches "region=ap" (clusters: eu-1, eu-2, us-1): the rollout holds`) {
		t.Errorf("diagnostic: %s", d)
	}
}

func holdMark(s *api.WaveSeat) string {
	if s.HoldAtFull {
		return "+hold"
	}
	return ""
}

func itoa(i int) string { return string(rune('0' + i)) }

// TestExpandUnreachableKeepsItsPart: by default an unreachable cluster
// keeps its part (which holds with the reason until the cluster is
// back), in a later wave.
func TestExpandUnreachableKeepsItsPart(t *testing.T) {
	clusters := slices.Clone(threeClusters)
	clusters[1].Unreachable = "cluster eu-2 unreachable since 12:03:04"
	out := Expand(&api.Set{Rollouts: []*api.Rollout{placed("web", "region in (eu,us)", api.OnWaveFailureRollbackAll)}}, func(*api.Rollout) []Cluster { return clusters }, noSeats)
	var got []string
	for _, r := range out.Rollouts {
		got = append(got, r.Key.String()+":"+itoa(r.Wave.Wave))
	}
	if want := "shop/web@eu-1:2 shop/web@eu-2:2 shop/web@us-1:1"; strings.Join(got, " ") != want {
		t.Errorf("parts %s, want %s", strings.Join(got, " "), want)
	}
}
