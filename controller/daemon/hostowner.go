package daemon

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/controller/runner"
)

// refuseHostIntruders turns the change of every rollout that claims a
// sluice.io/xds host another rollout owns into that rollout's Invalid
// event (status error and strategy-invalid alert): the owner's traffic is
// never replaced by another rollout's endpoints. The owner is the rollout
// that held the host first, as its record shows (Runner.HostOwner); when
// no rollout in force holds it, the first claimant of the commit by
// namespace/name. The refused rollout's spec never comes into force, so
// its record never claims the host and the same owner wins after any
// number of restarts.
func (d *Daemon) refuseHostIntruders(commit string, set *api.Set, events []runner.KeyedEvent) {
	claimed := map[string]api.Key{} // first claimant of a free host in this commit
	for _, i := range claimantsInKeyOrder(events) {
		ke := events[i]
		r := ke.Event.(rollout.Change).Rollout
		host := r.XDS.Host
		owner, held := d.runner.HostOwner(host)
		why := "which held it first"
		if !held {
			if first, ok := claimed[host]; ok {
				owner, held, why = first, true, "which comes first by namespace/name among the rollouts claiming it in this commit"
			} else {
				claimed[host] = ke.Key
			}
		}
		if !held || owner.Parent() == ke.Key.Parent() { // the parts of a rollout across clusters share its host
			continue
		}
		d.log.Error("rollout refused: its host is owned by another rollout", "rollout", ke.Key.String(), "host", host, "owner", owner.String())
		events[i].Event = rollout.Invalid{Commit: commit, Errors: api.Diagnostics{hostOwnedDiagnostic(set, r, owner, why)}}
	}
}

// claimantsInKeyOrder are the indexes of the events that bring a spec
// naming a host into force, sorted by rollout key so that ties go to the
// first by namespace/name.
func claimantsInKeyOrder(events []runner.KeyedEvent) []int {
	var out []int
	for i, ke := range events {
		c, ok := ke.Event.(rollout.Change)
		if ok && c.Rollout != nil && c.Class != rollout.ClassRemoved && c.Rollout.XDS != nil && c.Rollout.XDS.Host != "" {
			out = append(out, i)
		}
	}
	slices.SortFunc(out, func(a, b int) int {
		ka, kb := events[a].Key, events[b].Key
		return cmp.Or(strings.Compare(ka.Namespace, kb.Namespace), strings.Compare(ka.Name, kb.Name))
	})
	return out
}

// hostOwnedDiagnostic is the refused rollout's error, at its host field
// (its metadata.name line when the set has no line for the host).
func hostOwnedDiagnostic(set *api.Set, r *api.Rollout, owner api.Key, why string) api.Diagnostic {
	line := r.Line
	for _, hc := range set.HostConflicts {
		for _, c := range hc.Claims {
			if c.Key == r.Key && hc.Host == r.XDS.Host {
				line = c.Line
			}
		}
	}
	return api.Diagnostic{File: r.File, Line: line, Field: api.HostField, Severity: api.SeverityError,
		Message: fmt.Sprintf("host %q is owned by rollout %s, %s: one host has one owner, so this rollout is refused until one of them names another host", r.XDS.Host, owner, why)}
}
