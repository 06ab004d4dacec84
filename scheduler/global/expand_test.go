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
	// One cluster without a seat (it joined the selection): it joins the
	// plan, in the last wave (the first has no free seat), and no other
	// cluster moves, though eu-2 (smallest) would be first in a new plan.
	delete(seats, "shop/web@us-1")
	out = Expand(&api.Set{Rollouts: []*api.Rollout{placed("web", "region in (eu,us)", api.OnWaveFailureRollbackAll)}}, func(*api.Rollout) []Cluster { return threeClusters }, lookup)
	if got, want := seatList(out), "shop/web@eu-1:1/2+hold shop/web@eu-2:2/2 shop/web@us-1:2/2"; got != want {
		t.Errorf("parts after us-1 joined:\n got %s\nwant %s", got, want)
	}
	if r := out.Rollout(api.Key{Namespace: "shop", Name: "web@us-1"}); r == nil || r.Wave.Reason != "wave 2: us-1 (seated when its part joined the version's plan)" {
		t.Errorf("us-1's part: %+v", r)
	}
}

// TestExpandHeldPartGetsItsSeatBack is what TestKubeMultiClusterXDS once
// met: sluice started while eu-2 was not connected, so the plan put eu-2
// last and the runner held its part back (it kept no seat for it); when
// eu-2 connected, its pods were the fewest, and a new plan would have put
// it in wave 1 beside eu-1 and left wave 3 empty. It takes its seat of
// the plan back: wave 3.
func TestExpandHeldPartGetsItsSeatBack(t *testing.T) {
	r := placed("web", "region in (eu,us)", api.OnWaveFailureHold)
	r.Placement.Waves, _ = api.ParseWaves("1,2,100%")
	clusters := []Cluster{ // no pods yet anywhere
		{Name: "eu-1", Labels: map[string]string{"region": "eu"}},
		{Name: "eu-2", Labels: map[string]string{"region": "eu"}, Unreachable: "cluster eu-2 not connected yet"},
		{Name: "us-1", Labels: map[string]string{"region": "us"}},
	}
	first := Expand(&api.Set{Rollouts: []*api.Rollout{r}}, func(*api.Rollout) []Cluster { return clusters }, noSeats)
	if got, want := seatList(first), "shop/web@eu-1:1/3 shop/web@eu-2:3/3 shop/web@us-1:2/3"; got != want {
		t.Fatalf("the first plan:\n got %s\nwant %s", got, want)
	}
	held := map[string]*api.WaveSeat{}
	for _, p := range first.Rollouts {
		if p.Key.Cluster() != "eu-2" {
			held[p.Key.String()] = p.Wave
		}
	}
	connected := []Cluster{
		{Name: "eu-1", Labels: map[string]string{"region": "eu"}, StablePods: 2},
		{Name: "eu-2", Labels: map[string]string{"region": "eu"}},
		{Name: "us-1", Labels: map[string]string{"region": "us"}, StablePods: 2},
	}
	again := Expand(&api.Set{Rollouts: []*api.Rollout{r}}, func(*api.Rollout) []Cluster { return connected },
		func(k api.Key, _, _ string) *api.WaveSeat { return held[k.String()] })
	if got, want := seatList(again), "shop/web@eu-1:1/3 shop/web@eu-2:3/3 shop/web@us-1:2/3"; got != want {
		t.Errorf("once eu-2 connected:\n got %s\nwant %s", got, want)
	}
}

// TestExpandJoinsAfterFullWaves: a cluster that joins when its plan's
// waves are all full (the sizes give more clusters now) takes the last.
func TestExpandJoinsAfterFullWaves(t *testing.T) {
	r := placed("web", "region in (eu,us)", api.OnWaveFailureRollbackAll)
	r.Placement.Waves, _ = api.ParseWaves("1,2,100%")
	seats := map[string]*api.WaveSeat{
		"shop/web@eu-1": {Cluster: "eu-1", Wave: 1, Waves: 2},
		"shop/web@us-1": {Cluster: "us-1", Wave: 2, Waves: 2},
	}
	out := Expand(&api.Set{Rollouts: []*api.Rollout{r}}, func(*api.Rollout) []Cluster { return threeClusters },
		func(k api.Key, _, _ string) *api.WaveSeat { return seats[k.String()] })
	if got, want := seatList(out), "shop/web@eu-1:1/2+hold shop/web@eu-2:2/2 shop/web@us-1:2/2"; got != want {
		t.Errorf("parts:\n got %s\nwant %s", got, want)
	}
}

// seatList is "key:wave/waves" of every part, "+hold" when it holds at
// full, in the set's order.
func seatList(set *api.Set) string {
	var got []string
	for _, r := range set.Rollouts {
		got = append(got, r.Key.String()+":"+itoa(r.Wave.Wave)+"/"+itoa(r.Wave.Waves)+holdMark(r.Wave))
	}
	slices.Sort(got)
	return strings.Join(got, " ")
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
