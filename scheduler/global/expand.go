package global

import (
	"cmp"
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
// this version if every cluster that passes the filters has one, else a
// new plan.
func (p *Planner) expandOne(r *api.Rollout, clusters []Cluster, seats Seats) ([]*api.Rollout, error) {
	sel, err := labels.Parse(r.Placement.Clusters)
	if err != nil {
		return nil, err
	}
	candidates, _ := p.filter(&Request{Selector: sel}, clusters)
	kept, ok := keptSeats(r, candidates, seats)
	if !ok {
		waves, err := p.Plan(clusters, sel, r.Placement.Waves)
		if err != nil {
			return nil, err
		}
		kept = seatsOf(r, waves)
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

// keptSeats are the seats every selected cluster's part holds for r's
// version, when they all hold one of one plan.
func keptSeats(r *api.Rollout, selected []Cluster, seats Seats) ([]*api.WaveSeat, bool) {
	if len(selected) == 0 {
		return nil, false
	}
	hash := ""
	if r.Workload != nil {
		hash = r.Workload.PodTemplateHash
	}
	var out []*api.WaveSeat
	for _, c := range selected {
		seat := seats(r.Key.InCluster(c.Name), r.Version, hash)
		if seat == nil || (len(out) > 0 && seat.Waves != out[0].Waves) {
			return nil, false
		}
		s := *seat
		s.HoldAtFull = holdsAtFull(r, s.Wave, s.Waves)
		out = append(out, &s)
	}
	return out, true
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
