package daemon

import (
	"context"
	"fmt"
	"slices"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/controller/runner"
	"github.com/sluice-dev/sluice/diffengine"
	"github.com/sluice-dev/sluice/gitwatch"
	"go.opentelemetry.io/otel/trace"
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
	rev.Set = d.expandClusters(d.resolveRefs(rev.Set))
	defer d.trackWaves(rev.Set)
	if rev.Replay {
		// The commit in force, read again after a restart: its effects are
		// in the store already; only its templates were missing, and the
		// records of rollouts that were lost meanwhile.
		d.templates.update(rev.Set)
		lost := d.lostOnReplay(rev.Commit, rev.Set)
		d.refuseHostIntruders(rev.Commit, rev.Set, lost)
		lost = d.holdUnconnected(lost)
		if err := d.recoverLost(ctx, rev.Commit, lost); err != nil {
			return err
		}
		return d.doAll(ctx, rev.Commit, lost)
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
	var events []runner.KeyedEvent
	for _, c := range changes {
		ev, ok := d.eventFor(c, rev, rejected)
		if !ok {
			continue
		}
		d.meter.commitSeen(c.Rollout, rev)
		events = append(events, runner.KeyedEvent{Key: c.Rollout, Event: ev})
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
		events = append(events, runner.KeyedEvent{Key: key, Event: rollout.Invalid{Commit: rev.Commit, Errors: diags}})
	}
	d.refuseHostIntruders(rev.Commit, rev.Set, events)
	events = d.holdUnconnected(events)
	if err := d.recoverLost(ctx, rev.Commit, events); err != nil {
		return err
	}
	return d.doAll(ctx, rev.Commit, events)
}

// doAll hands a commit's events to the runner in order (the canary
// queue's tickets follow it) and waits until each has been processed
// (persisted and acted on). Different rollouts proceed in parallel, so the
// store commits their states together: one fsync for many instead of one
// each (a commit that changes 1,000 rollouts took 25 ms per rollout one
// after the other). Routes a change stops naming are released once it is
// applied. It returns the first error.
func (d *Daemon) doAll(ctx context.Context, commit string, events []runner.KeyedEvent) error {
	routing := make([]*api.ClusterRouting, len(events))
	refs := make([][2]string, len(events)) // namespace, name of a dropped workloadRef
	spans := make([]trace.Span, len(events))
	for i, ke := range events {
		if c, ok := ke.Event.(rollout.Change); ok {
			routing[i] = d.routingInForce(ke.Key, c)
			refs[i][0], refs[i][1] = d.droppedRef(ke.Key, c)
		}
		_, spans[i] = d.startChange(ctx, commit, ke.Key, eventName(ke.Event))
	}
	err := d.runner.DoAll(ctx, events, func(i int, err error) {
		endChange(spans[i], err)
		if err == nil {
			d.releaseRoutes(ctx, events[i].Key, routing[i])
			d.releaseRef(ctx, refs[i][0], refs[i][1])
			d.forgetRemoved(events[i])
		}
	})
	if err != nil {
		return fmt.Errorf("apply commit %s: %w", short(commit), err)
	}
	return nil
}

// forgetRemoved deletes the analysis series of a rollout that left git.
// The runner has stopped its runs by now (the removal stops them before
// it is reported processed), so no measurement brings the series back.
func (d *Daemon) forgetRemoved(ke runner.KeyedEvent) {
	if c, ok := ke.Event.(rollout.Change); ok && c.Class == rollout.ClassRemoved {
		d.analysis.Forget(ke.Key)
	}
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

// routingInForce is the part of a rollout's cluster routing in force
// that c drops: all of it when c removes the rollout from git, the routes
// a strategy edit stops naming otherwise (nil when none). Those routes
// are released once the runner has applied c.
func (d *Daemon) routingInForce(key api.Key, c rollout.Change) *api.ClusterRouting {
	if d.kube == nil {
		return nil
	}
	s, ok := d.runner.State(key)
	if !ok || s.Spec == nil || s.Spec.Routing == nil || s.Removed {
		return nil
	}
	var next *api.ClusterRouting
	if c.Class != rollout.ClassRemoved && c.Rollout != nil {
		next = c.Rollout.Routing
	}
	return droppedRouting(s.Spec.Routing, next)
}

// droppedRouting is the routes and virtual services of old that new does
// not name, with old's Services (nil when new names them all).
func droppedRouting(old, new *api.ClusterRouting) *api.ClusterRouting {
	if old == nil {
		return nil
	}
	if new == nil {
		return old
	}
	out := &api.ClusterRouting{StableService: old.StableService, CanaryService: old.CanaryService}
	if g := old.GatewayAPI; g != nil {
		var keep api.GatewayAPIRouting
		if new.GatewayAPI != nil {
			keep = *new.GatewayAPI
		}
		named := func(refs []api.GatewayRouteRef, r api.GatewayRouteRef) bool {
			return keep.Namespace == g.Namespace && slices.ContainsFunc(refs, func(k api.GatewayRouteRef) bool { return k.Name == r.Name })
		}
		d := &api.GatewayAPIRouting{Namespace: g.Namespace}
		for _, r := range g.HTTPRoutes {
			if !named(keep.HTTPRoutes, r) {
				d.HTTPRoutes = append(d.HTTPRoutes, r)
			}
		}
		for _, r := range g.GRPCRoutes {
			if !named(keep.GRPCRoutes, r) {
				d.GRPCRoutes = append(d.GRPCRoutes, r)
			}
		}
		if len(d.HTTPRoutes)+len(d.GRPCRoutes) > 0 {
			out.GatewayAPI = d
		}
	}
	if i := old.Istio; i != nil {
		var keep api.IstioRouting
		if new.Istio != nil {
			keep = *new.Istio
		}
		d := &api.IstioRouting{}
		for _, vs := range i.VirtualServices {
			if !slices.ContainsFunc(keep.VirtualServices, func(k api.IstioVirtualService) bool { return k.Name == vs.Name && k.Namespace == vs.Namespace }) {
				d.VirtualServices = append(d.VirtualServices, vs)
			}
		}
		if dr := i.DestinationRule; dr != nil && (keep.DestinationRule == nil || keep.DestinationRule.Name != dr.Name || keep.DestinationRule.Namespace != dr.Namespace) {
			d.DestinationRule = dr
		}
		if len(d.VirtualServices) > 0 || d.DestinationRule != nil {
			out.Istio = d
		}
	}
	if out.GatewayAPI == nil && out.Istio == nil {
		return nil
	}
	return out
}

// releaseRoutes restores the routes a rollout no longer names (or all of
// them, when it left git) to 100% stable and removes sluice's rules. The
// machine leaves the xDS traffic of a removed rollout as it was (its
// clients keep their last routes), but a route in the cluster is the
// user's object, and sluice's rules in it would outlive sluice's interest.
// A failure is logged: the commit is applied all the same.
func (d *Daemon) releaseRoutes(ctx context.Context, key api.Key, r *api.ClusterRouting) {
	if r == nil {
		return
	}
	if err := d.kube.routed.release(ctx, key, r); err != nil {
		d.log.Error("release routes no longer named", "rollout", key.String(), "err", err)
	}
}

// eventName names a commit's event for a rollout in its change span: the
// change class ("NewVersion", "StrategyEdit", ...) or "Invalid".
func eventName(ev rollout.Event) string {
	if c, ok := ev.(rollout.Change); ok {
		return string(c.Class)
	}
	return "Invalid"
}
