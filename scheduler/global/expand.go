package global

import (
	"cmp"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/sluice-dev/sluice/api"
)

// Facts are the clusters the daemon knows, as seen for one rollout (its
// stable pods and request share in each).
type Facts func(r *api.Rollout) []Cluster

// Seats returns the wave seat the part key has for version (and pod
// template hash) already, nil when it has none: a plan is made once per
// version, so that re-reading the same commit (a restart, a Deployment
// change) never moves a cluster to another wave mid-rollout.
type Seats func(part api.Key, version, hash string) *api.WaveSeat

// Expand returns a copy of set in which every rollout with a placement is
// replaced by its parts, one per cluster that passes the default cluster
// filters (DefaultPlugins), each with its wave seat. A rollout for which
// no cluster passes moves to Rejected with the error at its
// sluice.io/clusters annotation: it holds, and what runs keeps running.
// set itself is not changed.
func Expand(set *api.Set, facts Facts, seats Seats) *api.Set {
	return defaultPlanner.Expand(set, facts, seats)
}

// Expand is the package's Expand with p's cluster plugins.
func (p *Planner) Expand(set *api.Set, facts Facts, seats Seats) *api.Set {
	out := *set
	out.Rollouts = make([]*api.Rollout, 0, len(set.Rollouts))
	out.Rejected = slices.Clone(set.Rejected)
	out.Diagnostics = slices.Clone(set.Diagnostics)
	for _, r := range set.Rollouts {
		if r.Placement == nil {
			out.Rollouts = append(out.Rollouts, r)
			continue
		}
		parts, err := p.expandOne(r, facts(r), seats)
		if err != nil {
			d := api.Diagnostic{File: r.File, Line: r.Line, Field: "metadata.annotations[" + api.ClustersAnnotation + "]", Severity: api.SeverityError,
				Message: err.Error() + ": the rollout holds until a cluster matches"}
			out.Diagnostics = append(out.Diagnostics, d)
			out.Rejected = append(out.Rejected, api.Rejected{Key: r.Key, File: r.File, Diagnostics: api.Diagnostics{d}})
			continue
		}
		out.Rollouts = append(out.Rollouts, parts...)
	}
	slices.SortFunc(out.Rollouts, func(a, b *api.Rollout) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return &out
}

// expandOne makes the parts of one rollout: the seats the parts hold for
// this version, with a free seat of that plan for a selected cluster
// whose part holds none (joinPlan); a new plan when no part holds one.
func (p *Planner) expandOne(r *api.Rollout, clusters []Cluster, seats Seats) ([]*api.Rollout, error) {
	sel, err := labels.Parse(r.Placement.Clusters)
	if err != nil {
		return nil, err
	}
	candidates, _ := p.filter(&Request{Selector: sel}, clusters)
	kept, unseated, ok := keptSeats(r, candidates, seats)
	if !ok || len(unseated) > 0 {
		waves, err := p.Plan(clusters, sel, r.Placement.Waves)
		if err != nil {
			return nil, err
		}
		if ok {
			kept = append(kept, joinPlan(r, kept, unseated, waves)...)
		} else {
			kept = seatsOf(r, waves)
		}
	}
	parts := make([]*api.Rollout, 0, len(kept))
	for _, seat := range kept {
		part := *r
		part.Key = r.Key.InCluster(seat.Cluster)
		part.Wave = seat
		parts = append(parts, &part)
	}
	return parts, nil
}

// keptSeats are the seats the selected clusters' parts hold for r's
// version, and the selected clusters whose part holds none; false when no
// part holds one or the seats held are not of one valid plan.
func keptSeats(r *api.Rollout, selected []Cluster, seats Seats) (kept []*api.WaveSeat, unseated []string, ok bool) {
	hash := ""
	if r.Workload != nil {
		hash = r.Workload.PodTemplateHash
	}
	for _, c := range selected {
		seat := seats(r.Key.InCluster(c.Name), r.Version, hash)
		if seat == nil {
			unseated = append(unseated, c.Name)
			continue
		}
		if seat.Waves < 1 || len(kept) > 0 && seat.Waves != kept[0].Waves {
			return nil, nil, false
		}
		s := *seat
		s.HoldAtFull = holdsAtFull(r, s.Wave, s.Waves)
		kept = append(kept, &s)
	}
	return kept, unseated, len(kept) > 0
}

// joinPlan seats the unseated clusters in the plan the kept seats are of,
// so that no seated cluster moves to another wave mid-version: each takes,
// in the order of a new plan (waves), the first wave that has fewer
// clusters than the new plan gives it, else the last wave. A part that
// was held back while its cluster was not connected (so the runner kept
// no seat for it) thus gets back the seat it was planned in: a cluster
// that cannot be reached is planned after the reachable ones, and the
// seats left free are the last ones. Were it planned anew instead, the
// version would have two plans: two first waves and no last one, whose
// part serves the clients of no cluster (gateway/views.go).
func joinPlan(r *api.Rollout, kept []*api.WaveSeat, unseated []string, waves []Wave) []*api.WaveSeat {
	n := kept[0].Waves
	free := make([]int, n)
	if len(waves) == n {
		for i, w := range waves {
			free[i] = len(w.Clusters)
		}
	}
	for _, s := range kept {
		if s.Wave >= 1 && s.Wave <= n {
			free[s.Wave-1]--
		}
	}
	var out []*api.WaveSeat
	for _, w := range waves {
		for _, c := range w.Clusters {
			if !slices.Contains(unseated, c) {
				continue
			}
			wave := n
			if i := slices.IndexFunc(free, func(f int) bool { return f > 0 }); i >= 0 {
				wave = i + 1
			}
			free[wave-1]--
			out = append(out, &api.WaveSeat{Cluster: c, Wave: wave, Waves: n, HoldAtFull: holdsAtFull(r, wave, n),
				Reason: fmt.Sprintf("wave %d: %s (seated when its part joined the version's plan)", wave, c)})
		}
	}
	return out
}

// seatsOf seats each planned cluster in its wave.
func seatsOf(r *api.Rollout, waves []Wave) []*api.WaveSeat {
	var out []*api.WaveSeat
	for i, w := range waves {
		for _, c := range w.Clusters {
			out = append(out, &api.WaveSeat{Cluster: c, Wave: i + 1, Waves: len(waves), Reason: w.Reason,
				HoldAtFull: holdsAtFull(r, i+1, len(waves))})
		}
	}
	return out
}

// holdsAtFull: with rollback-all, every wave but the last keeps its old
// stable until the last wave has passed, so that a later failure can
// send it back.
func holdsAtFull(r *api.Rollout, wave, waves int) bool {
	return r.Placement.OnWaveFailure != api.OnWaveFailureHold && wave < waves
}
