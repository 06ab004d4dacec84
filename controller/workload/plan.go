package workload

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/sluice-dev/sluice/controller/rollout"
)

// replicaSetFacts is what planning needs to know of one ReplicaSet found
// in the rollout's namespace.
type replicaSetFacts struct {
	Name string
	Hash string
	// Ours: labelled managed-by sluice for this rollout, so sluice scales
	// it to 0 and deletes it when it is not wanted.
	Ours bool
	// OfRollout: labelled sluice.io/rollout with the rollout's name, named
	// "<rollout>-<hash>", or owned by the Argo Rollout of the same name: a
	// candidate for adoption.
	OfRollout bool
	Revision  int64
	Role      string
	Replicas  int32
	Created   time.Time
}

func factsOf(rs *appsv1.ReplicaSet, rolloutName string) replicaSetFacts {
	f := replicaSetFacts{
		Name:    rs.Name,
		Hash:    rs.Labels[LabelHash],
		Ours:    rs.Labels[LabelManagedBy] == ManagedByValue && rs.Labels[LabelRollout] == rolloutName,
		Role:    rs.Annotations[AnnotationRole],
		Created: rs.CreationTimestamp.Time,
	}
	f.OfRollout = rs.Labels[LabelRollout] == rolloutName || rs.Name == replicaSetName(rolloutName, f.Hash) || ownedByArgoRollout(rs, rolloutName)
	f.Revision, _ = strconv.ParseInt(rs.Annotations[AnnotationRevision], 10, 64)
	if rs.Spec.Replicas != nil {
		f.Replicas = *rs.Spec.Replicas
	} else {
		f.Replicas = 1 // the API's default
	}
	return f
}

func ownedByArgoRollout(rs *appsv1.ReplicaSet, rolloutName string) bool {
	for _, o := range rs.OwnerReferences {
		if o.Kind == "Rollout" && o.Name == rolloutName {
			return true
		}
	}
	return false
}

// replicaSetName is the name sluice gives a version's ReplicaSet.
func replicaSetName(rolloutName, hash string) string { return rolloutName + "-" + hash }

// applyStep is one wanted set and the ReplicaSet that will carry it.
type applyStep struct {
	Set      rollout.WorkloadSet
	Name     string
	Revision int64
}

// scalePlan is everything one Scale call does, in order: apply the wanted
// sets, scale the unwanted ones kept as history to 0, delete the rest.
type scalePlan struct {
	Apply  []applyStep
	Retire []string
	Delete []string
}

// planScale decides which ReplicaSet carries each wanted set (adopting an
// existing one of the same hash), the revisions, and what leaves. It is
// pure, so that a repeated call over the result of a first one plans no
// change: a set keeps its revision while it stays wanted.
func planScale(rolloutName string, sets []rollout.WorkloadSet, have []replicaSetFacts, historyLimit int) (scalePlan, error) {
	seen := map[string]bool{}
	for _, s := range sets {
		if s.Hash == "" {
			return scalePlan{}, fmt.Errorf("set %s (%s): no pod-template hash", s.Role, s.Version)
		}
		if seen[s.Hash] {
			return scalePlan{}, fmt.Errorf("two sets with pod-template hash %s", s.Hash)
		}
		seen[s.Hash] = true
	}
	var p scalePlan
	maxRev := int64(0)
	for _, f := range have {
		maxRev = max(maxRev, f.Revision)
	}
	chosen := map[string]bool{}
	for _, s := range byRevisionOrder(sets) {
		step := applyStep{Set: s, Name: setName(rolloutName, s)}
		if f, ok := adoptable(rolloutName, s.Hash, have); ok {
			step.Name = f.Name
			if stillWanted(f) {
				step.Revision = f.Revision
			}
		}
		if step.Revision == 0 {
			maxRev++
			step.Revision = maxRev
		}
		chosen[step.Name] = true
		p.Apply = append(p.Apply, step)
	}
	var old []replicaSetFacts
	for _, f := range have {
		if f.Ours && !chosen[f.Name] {
			old = append(old, f)
		}
	}
	slices.SortFunc(old, func(a, b replicaSetFacts) int {
		if c := cmp.Compare(b.Revision, a.Revision); c != 0 {
			return c
		}
		return b.Created.Compare(a.Created)
	})
	for i, f := range old {
		switch {
		case f.Role == string(rollout.RoleExperiment):
			// An experiment's pods get no traffic: nothing to keep.
			p.Delete = append(p.Delete, f.Name)
		case i >= historyLimit:
			p.Delete = append(p.Delete, f.Name)
		case f.Replicas != 0 || f.Role != RoleInactive:
			p.Retire = append(p.Retire, f.Name)
		}
	}
	return p, nil
}

// stillWanted says a ReplicaSet was wanted by the last Scale, so it keeps
// its revision; one brought back from the history (inactive) or adopted
// from elsewhere (no role) becomes the newest.
func stillWanted(f replicaSetFacts) bool {
	switch rollout.WorkloadRole(f.Role) {
	case rollout.RoleStable, rollout.RoleCanary, rollout.RoleBaseline, rollout.RoleOld, rollout.RoleExperiment:
		return f.Revision > 0
	}
	return false
}

// byRevisionOrder orders sets as their revisions should grow: a draining
// old version first, then stable, then the canary (the newest) and its
// baseline, started with it.
func byRevisionOrder(sets []rollout.WorkloadSet) []rollout.WorkloadSet {
	rank := map[rollout.WorkloadRole]int{rollout.RoleOld: 0, rollout.RoleStable: 1, rollout.RoleCanary: 2, rollout.RoleBaseline: 3, rollout.RoleExperiment: 4}
	out := slices.Clone(sets)
	slices.SortStableFunc(out, func(a, b rollout.WorkloadSet) int { return cmp.Compare(rank[a.Role], rank[b.Role]) })
	return out
}

// adoptable finds the ReplicaSet that already runs hash for the rollout:
// the one with sluice's name first, then one sluice labelled, then the
// oldest other (an Argo Rollouts one, say).
func adoptable(rolloutName, hash string, have []replicaSetFacts) (replicaSetFacts, bool) {
	var best replicaSetFacts
	bestRank := -1
	for _, f := range have {
		if f.Hash != hash || !f.OfRollout {
			continue
		}
		rank := 0
		switch {
		case f.Name == replicaSetName(rolloutName, hash):
			rank = 2
		case f.Ours:
			rank = 1
		}
		if rank > bestRank || rank == bestRank && f.Created.Before(best.Created) {
			best, bestRank = f, rank
		}
	}
	return best, bestRank >= 0
}
