package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/controller/runner"
	"github.com/sluice-dev/sluice/controller/workload"
	"github.com/sluice-dev/sluice/gitwatch"
)

// Where a rollout sluice has no record of is recovered from (--recover-from;
// DESIGN §14, docs/state.md "After a state loss").
const (
	RecoverFromCluster = "cluster" // sluice's ReplicaSets, then git
	RecoverFromGit     = "git"     // git's history of the rollout's file
	RecoverFromNone    = "none"    // the version in git is stable at once
)

// recallTimeout bounds the recovery of one rollout: a walk of git's
// history and, in Kubernetes mode, one list of ReplicaSets.
const recallTimeout = 30 * time.Second

// recoverLost replaces the Change of every rollout the runner has no
// record of with what recovery finds: the record was lost (or never
// written, for a rollout added now, whose history holds nothing and which
// keeps its Change). A recovery that cannot read git or the cluster fails
// the commit, which is then applied again: guessing would promote.
func (d *Daemon) recoverLost(ctx context.Context, commit string, events []runner.KeyedEvent) error {
	if d.opts.RecoverFrom == RecoverFromNone {
		return nil
	}
	for i, ke := range events {
		c, ok := ke.Event.(rollout.Change)
		if !ok || c.Rollout == nil || c.Class == rollout.ClassRemoved {
			continue
		}
		if _, known := d.runner.State(ke.Key); known {
			continue
		}
		ev, err := d.recoverRollout(ctx, commit, c.Rollout)
		if err != nil {
			return fmt.Errorf("recover %s after a state loss: %w", ke.Key, err)
		}
		if ev != nil {
			d.log.Warn("rollout recovered after a state loss", "rollout", ke.Key.String(), "source", ev.Source,
				"stable", ev.Stable.Version, "canary", canaryVersion(ev), "step", ev.Step+1, "found", ev.Found)
			events[i].Event = *ev
		}
	}
	return nil
}

// lostOnReplay is a Change for every rollout of the commit in force that
// the runner has no record of: its record was lost while the commit
// stayed recorded (the cluster store's SluiceRollout deleted, say).
func (d *Daemon) lostOnReplay(commit string, set *api.Set) []runner.KeyedEvent {
	var events []runner.KeyedEvent
	for _, r := range set.Rollouts {
		if _, known := d.runner.State(r.Key); !known {
			events = append(events, runner.KeyedEvent{Key: r.Key, Event: rollout.Change{Commit: commit, Class: rollout.ClassAdded, Rollout: r}})
		}
	}
	return events
}

// recoverRollout finds where cur's rollout stood: in the cluster first
// (Kubernetes mode, --recover-from cluster), then in git. nil: nothing
// found, cur is the first version.
func (d *Daemon) recoverRollout(ctx context.Context, commit string, cur *api.Rollout) (*rollout.Recovered, error) {
	ctx, cancel := context.WithTimeout(ctx, recallTimeout)
	defer cancel()
	if d.opts.RecoverFrom == RecoverFromCluster && d.kube != nil {
		ev, err := d.recoverFromCluster(ctx, commit, cur)
		if err != nil || ev != nil {
			return ev, err
		}
	}
	return d.recoverFromGit(ctx, commit, cur)
}

// recoverFromGit takes the newest earlier version in the history of cur's
// file as stable, and runs cur as a canary from the first step. An earlier
// version that cur's file gives no endpoints for cannot take traffic
// (standalone mode): cur stays stable then, and the alert says so.
func (d *Daemon) recoverFromGit(ctx context.Context, commit string, cur *api.Rollout) (*rollout.Recovered, error) {
	found, err := d.watcher.Recall(ctx, gitwatch.RecallQuery{Commit: commit, Key: cur.Key, File: cur.File,
		Accept: func(r *api.Rollout) bool { return !sameVersion(r, cur) }})
	if err != nil || found.Rollout == nil {
		return nil, err
	}
	earlier := found.Rollout
	what := fmt.Sprintf("commit %s held %s before %s", short(found.Commit), earlier.Version, cur.Version)
	if cur.Workload == nil && cur.XDS != nil && len(cur.XDS.Endpoints[earlier.Version]) == 0 {
		return &rollout.Recovered{Commit: commit, Source: rollout.RecoveredFromGit, Stable: cur, Step: -1,
			Found: what + fmt.Sprintf(", but %s names no endpoints for %s, which so cannot take traffic back", cur.File, earlier.Version)}, nil
	}
	return &rollout.Recovered{Commit: commit, Source: rollout.RecoveredFromGit, Stable: earlier, Canary: cur, Step: -1, Found: what}, nil
}

// recoverFromCluster rebuilds the rollout from sluice's ReplicaSets: the
// set labelled stable stays stable; a set of cur's version marked aborted
// comes back aborted, its traffic to stable; a canary set of cur's version
// holds at the position written on it; a canary of another version is
// replaced by cur, which runs from the first step; draining sets keep
// their pods for a whole delay. nil when the cluster holds no stable set
// of the rollout.
func (d *Daemon) recoverFromCluster(ctx context.Context, commit string, cur *api.Rollout) (*rollout.Recovered, error) {
	found, err := clusterWorkloads{d.kube}.Recall(ctx, cur.Key)
	if err != nil || found.Stable.Hash == "" {
		return nil, err
	}
	stable, err := d.versionSpec(ctx, commit, cur, found.Stable)
	if err != nil {
		return nil, err
	}
	ev := &rollout.Recovered{Commit: commit, Source: rollout.RecoveredFromCluster, Stable: stable, Step: -1, Found: found.String()}
	switch c := found.Canary; {
	case sameVersion(stable, cur):
		// cur is the stable version: nothing in flight.
	case found.Aborted != nil && found.Aborted.Hash == hashOf(cur):
		ev.Canary, ev.Aborted, ev.Step = cur, true, 0
		if at := found.Aborted.At; at != nil {
			ev.Step = at.Step
		}
	case c != nil && c.Hash == hashOf(cur) && c.At != nil:
		ev.Canary, ev.Step, ev.Weight = cur, c.At.Step, c.At.Weight
	case c != nil && c.Hash == hashOf(cur), found.Draining(hashOf(cur)):
		// A canary with no readable position, or one draining (it was
		// aborted): hold before its first step for an operator to decide.
		ev.Canary, ev.Step, ev.Weight = cur, 0, 0
	default:
		ev.Canary = cur
	}
	if ev.Draining, err = d.drainingSets(ctx, commit, cur, found); err != nil {
		return nil, err
	}
	return ev, nil
}

// drainingSets are the sets found draining that still run pods: the
// machine keeps them until the recovered traffic is ACKed and a whole
// scale-down delay has passed, as clients may still route to them.
func (d *Daemon) drainingSets(ctx context.Context, commit string, cur *api.Rollout, found workload.Found) ([]rollout.Drain, error) {
	var drains []rollout.Drain
	sets := found.Old
	if a := found.Aborted; a != nil && !found.Draining(a.Hash) {
		// The aborted canary's set still has the canary role (its abort
		// waited for stable pods): it drains too.
		sets = append(slices.Clone(sets), *a)
	}
	for _, s := range sets {
		if s.Replicas == 0 {
			continue
		}
		spec, err := d.versionSpec(ctx, commit, cur, s)
		if err != nil {
			return nil, err
		}
		drains = append(drains, rollout.Drain{Version: spec.Version, Hash: s.Hash, Replicas: s.Replicas, Spec: spec})
	}
	return drains, nil
}

// versionSpec is the rollout that set s runs: cur when it is cur's
// version, else the newest such version in git's history, else cur with
// the ReplicaSet's own template (history rewritten since).
func (d *Daemon) versionSpec(ctx context.Context, commit string, cur *api.Rollout, s workload.FoundSet) (*api.Rollout, error) {
	if hashOf(cur) == s.Hash {
		return cur, nil
	}
	found, err := d.watcher.Recall(ctx, gitwatch.RecallQuery{Commit: commit, Key: cur.Key, File: cur.File,
		Accept: func(r *api.Rollout) bool { return hashOf(r) == s.Hash }})
	if err != nil {
		return nil, err
	}
	if found.Rollout != nil {
		return found.Rollout, nil
	}
	return withTemplate(cur, s)
}

// withTemplate is a copy of cur that runs s's version and template.
func withTemplate(cur *api.Rollout, s workload.FoundSet) (*api.Rollout, error) {
	b, err := json.Marshal(cur)
	if err != nil {
		return nil, fmt.Errorf("copy %s: %w", cur.Key, err)
	}
	var r api.Rollout
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("copy %s: %w", cur.Key, err)
	}
	r.Version = s.Version
	r.Spec.Template = s.Template
	if r.Workload != nil {
		r.Workload.PodTemplateHash = s.Hash
	}
	return &r, nil
}

// sameVersion reports whether a and b run the same version: the same
// image and, in Kubernetes mode, the same pod template.
func sameVersion(a, b *api.Rollout) bool {
	return a.Version == b.Version && hashOf(a) == hashOf(b)
}

func hashOf(r *api.Rollout) string {
	if r.Workload == nil {
		return ""
	}
	return r.Workload.PodTemplateHash
}

func canaryVersion(ev *rollout.Recovered) string {
	if ev.Canary == nil {
		return ""
	}
	return ev.Canary.Version
}
