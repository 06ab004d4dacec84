package daemon

import (
	"context"
	"fmt"
	"slices"

	"golang.org/x/sync/errgroup"

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
	changes := diffengine.DiffSets(inForce, rev.Set, d.live)
	// Runs started by these changes resolve templates from this revision.
	d.templates.update(rev.Set)
	rejected := map[api.Key]api.Diagnostics{}
	for _, r := range rev.Set.Rejected {
		rejected[r.Key] = r.Diagnostics
	}
	var events []keyedEvent
	for _, c := range changes {
		ev, ok := d.eventFor(c, rev, rejected)
		if !ok {
			continue
		}
		d.meter.commitSeen(c.Rollout, rev)
		events = append(events, keyedEvent{key: c.Rollout, ev: ev})
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
		events = append(events, keyedEvent{key: key, ev: rollout.Invalid{Commit: rev.Commit, Errors: diags}})
	}
	return d.doAll(ctx, rev.Commit, events)
}

// keyedEvent is one rollout's event from a commit.
type keyedEvent struct {
	key api.Key
	ev  rollout.Event
}

// applyParallelism bounds the events of one commit in flight at once.
const applyParallelism = 256

// doAll hands every event to the runner and waits until each has been
// processed (persisted and acted on). Different rollouts proceed in
// parallel, so the store commits their states together (one fsync for many
// instead of one each: a commit that changes 1,000 rollouts took 25 ms per
// rollout one after the other). It returns the first error.
func (d *Daemon) doAll(ctx context.Context, commit string, events []keyedEvent) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(applyParallelism)
	for _, ke := range events {
		g.Go(func() error {
			if _, err := d.runner.Do(ctx, ke.key, ke.ev); err != nil {
				return fmt.Errorf("apply commit %s to %s: %w", short(commit), ke.key, err)
			}
			return nil
		})
	}
	return g.Wait()
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
