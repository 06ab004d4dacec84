package runner

import (
	"fmt"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/rollout"
)

// hostIndex knows which rollouts hold each sluice.io/xds host: those whose
// spec in force (persisted in their record) names it. It is derived from
// the records alone, so it is the same after a restart, whatever order the
// restored rollouts republish in. The daemon admits a change only if its
// host is free or already the rollout's own, so one holder per host is
// the rule; several happen only with records written before that rule
// (the old binary refused the second publish but kept its spec). r.mu
// guards it.
type hostIndex struct {
	holders map[string]map[api.Key]time.Time // host → holder → its record's CreatedAt
}

func newHostIndex() hostIndex {
	return hostIndex{holders: map[string]map[api.Key]time.Time{}}
}

// heldHost is the host a state holds: its spec in force's, unless the
// rollout left git.
func heldHost(s rollout.State) string {
	if s.Spec == nil || s.Removed || s.Spec.XDS == nil {
		return ""
	}
	return s.Spec.XDS.Host
}

// track moves key's claim from old's host to next's.
func (h hostIndex) track(key api.Key, old, next rollout.State, createdAt time.Time) {
	was, is := heldHost(old), heldHost(next)
	if was == is {
		if is != "" {
			h.holders[is][key] = createdAt
		}
		return
	}
	if was != "" {
		delete(h.holders[was], key)
		if len(h.holders[was]) == 0 {
			delete(h.holders, was)
		}
	}
	if is != "" {
		if h.holders[is] == nil {
			h.holders[is] = map[api.Key]time.Time{}
		}
		h.holders[is][key] = createdAt
	}
}

// owner is the rollout that holds host: the only holder, or among several
// the one created first (its record's CreatedAt; unknown counts as
// latest), then by namespace/name. ok is false when nobody holds it.
func (h hostIndex) owner(host string) (owner api.Key, ok bool) {
	var first time.Time
	for k, created := range h.holders[host] {
		if !ok || createdBefore(created, first) || (created.Equal(first) && k.String() < owner.String()) {
			owner, first, ok = k, created, true
		}
	}
	return owner, ok
}

func createdBefore(a, b time.Time) bool {
	switch {
	case a.IsZero():
		return false
	case b.IsZero():
		return true
	}
	return a.Before(b)
}

// HostOwner reports which rollout owns host: the one whose spec in force
// names it (see hostIndex.owner when records disagree). ok is false when
// no rollout in force names it.
func (r *Runner) HostOwner(host string) (api.Key, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.hosts.owner(host)
}

// HostOwnedError is why a rollout's traffic was not published: another
// rollout owns its host.
type HostOwnedError struct {
	Host  string
	Owner api.Key
}

func (e *HostOwnedError) Error() string {
	return fmt.Sprintf("host %q is owned by rollout %s, which held it first", e.Host, e.Owner)
}

// hostRefusal is the error for publishing t when another rollout owns its
// host, nil when t may be published.
func (r *Runner) hostRefusal(t api.Traffic) error {
	if t.Host == "" {
		return nil
	}
	owner, ok := r.HostOwner(t.Host)
	if !ok || owner.Parent() == t.Rollout.Parent() { // the parts of a rollout across clusters share its host
		return nil
	}
	return &HostOwnedError{Host: t.Host, Owner: owner}
}
