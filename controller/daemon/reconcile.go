package daemon

import (
	"context"
	"fmt"
	"slices"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/diffengine"
	"github.com/sluice-dev/sluice/gitwatch"
)

// apply turns one Revision into per-rollout events and hands them to the
// runner, waiting until each is persisted. The caller records the commit
// as processed only after apply returns without error, so a crash never
// skips a commit (and replaying one is harmless: the same change again is
// no change).
func (d *Daemon) apply(ctx context.Context, rev gitwatch.Revision) error {
	if rev.Set.Refused {
		if rev.Replay {
			return nil // reported when it was first applied
		}
		return d.refuse(ctx, rev)
	}
	if rev.Replay {
		// The commit in force, read again after a restart: its effects are
		// in the store already; only its templates were missing.
		d.templates.update(rev.Set)
		return nil
	}
	if !rev.Changed && rev.OldCommit != "" && d.templates.current() != nil {
		return nil
	}
	inForce := d.inForce()
	changes := d.traceDiff(ctx, func() []diffengine.Change { return diffengine.DiffSets(inForce, rev.Set, d.live) })
	// Runs started by these changes resolve templates from this revision.
	d.templates.update(rev.Set)
	rejected := map[api.Key]api.Diagnostics{}
	for _, r := range rev.Set.Rejected {
		rejected[r.Key] = r.Diagnostics
	}
	for _, c := range changes {
		ev, ok := d.eventFor(c, rev, rejected)
		if !ok {
			continue
		}
		d.meter.commitSeen(c.Rollout, rev)
		cctx, span := d.startChange(ctx, rev.Commit, c.Rollout, eventName(ev))
		_, err := d.runner.Do(cctx, c.Rollout, ev)
		endChange(span, err)
		if err != nil {
			return fmt.Errorf("apply commit %s to %s: %w", short(rev.Commit), c.Rollout, err)
		}
		delete(rejected, c.Rollout)
	}
	// Rollouts whose file no longer parses keep their spec in force; the
	// diff leaves them out, so report the file's errors here.
	for _, r := range inForce.Rollouts {
		if _, named := rejected[r.Key]; !named && slices.Contains(rev.Set.Unreadable, r.File) && rev.Set.Rollout(r.Key) == nil {
			rejected[r.Key] = fileDiagnostics(rev.Set, r.File)
		}
	}
	// Rejected rollouts that the diff did not mention.
	for key, diags := range rejected {
		cctx, span := d.startChange(ctx, rev.Commit, key, "Invalid")
		_, err := d.runner.Do(cctx, key, rollout.Invalid{Commit: rev.Commit, Errors: diags})
		endChange(span, err)
		if err != nil {
			return fmt.Errorf("apply commit %s to %s: %w", short(rev.Commit), key, err)
		}
	}
	return nil
}

// eventFor maps a diff to the state machine's event; a rollout that is
// named in the new commit but invalid gets its errors instead.
func (d *Daemon) eventFor(c diffengine.Change, rev gitwatch.Revision, rejected map[api.Key]api.Diagnostics) (rollout.Event, bool) {
	if diags, ok := rejected[c.Rollout]; ok {
		return rollout.Invalid{Commit: rev.Commit, Errors: diags}, true
	}
	if c.Class == diffengine.Unchanged {
		// A fix that restores exactly the spec in force still has to clear
		// the errors the broken commit left in status.
		if s, ok := d.runner.State(c.Rollout); !ok || len(s.Errors) == 0 {
			return nil, false
		}
		c.Class = diffengine.Cosmetic
	}
	ch := rollout.Change{Commit: rev.Commit, Class: rollout.Class(c.Class), Rollout: c.New}
	if d.live(c.Rollout).InFlight {
		resume := int32(c.ResumeStep)
		ch.ResumeStep = &resume
	}
	if c.Risky {
		ch.Risky = c.Reasons
	}
	return ch, true
}

// inForce is the set of specs the runner is executing: risk is judged
// against what runs, not against the previous commit.
func (d *Daemon) inForce() *api.Set {
	set := &api.Set{}
	if cur := d.templates.current(); cur != nil {
		set.Templates = cur.Templates
	}
	for _, st := range d.runner.List() {
		key := api.Key{Namespace: st.Namespace, Name: st.Name}
		if s, ok := d.runner.State(key); ok && s.Spec != nil && !s.Removed {
			set.Rollouts = append(set.Rollouts, s.Spec)
		}
	}
	return set
}

// live reports a rollout's position for the diff engine's risk rules.
func (d *Daemon) live(key api.Key) diffengine.Live {
	s, ok := d.runner.State(key)
	if !ok || s.CanaryVersion == "" || s.Aborted {
		return diffengine.Live{}
	}
	return diffengine.Live{InFlight: true, StepIndex: int(s.StepIndex), CanaryWeight: s.Weights.Canary}
}

func fileDiagnostics(set *api.Set, file string) api.Diagnostics {
	var out api.Diagnostics
	for _, d := range set.Diagnostics.Errors() {
		if d.File == file {
			out = append(out, d)
		}
	}
	return out
}

func short(sha string) string {
	if len(sha) > 7 {
		return sha[:7]
	}
	return sha
}

// eventName names a commit's event for a rollout in its change span: the
// change class ("NewVersion", "StrategyEdit", ...) or "Invalid".
func eventName(ev rollout.Event) string {
	if c, ok := ev.(rollout.Change); ok {
		return string(c.Class)
	}
	return "Invalid"
}
