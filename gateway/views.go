package gateway

import (
	"maps"
	"slices"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/sluice-dev/sluice/api"
)

// Views: a rollout across clusters (Kubernetes mode, docs/multi-cluster.md)
// has one part per cluster, keyed ns/name@C, and all its parts serve the
// same host. Each part publishes its own clusters and endpoints
// (ns/name@C/stable, ...), whose endpoints carry the locality
// region/zone/C, but a client gets one listener, route configuration and
// route scope for the host: the ones of the part in its own cluster. A
// client names its cluster by its node locality's sub_zone, so each
// cluster's clients follow their own cluster's wave and reach their own
// cluster's pods. A client that names no cluster of the rollout gets the
// routes of the part marked DefaultRoutes (the last wave's), or while
// there is none, of the part of the highest wave there is.
//
// The server keeps, beside the default snapshot, one snapshot per cluster
// any part named (a view). Every publish builds all of them from the same
// changes, in the same generation; they share, through the immutable
// trees, everything but the host routes of rollouts across clusters.
// Views are never dropped: there are as many as clusters.

// viewOf is the view a client's node selects: its locality's sub_zone.
func viewOf(n *corev3.Node) string { return capName(n.GetLocality().GetSubZone()) }

// view is what the clients of cluster v get: v's view, or the default
// snapshot when no rollout runs in v.
func (s *snapshot) view(v string) *snapshot {
	if vs, ok := s.views[v]; ok {
		return vs
	}
	return s
}

// withViews is the default snapshot and every view.
func (s *snapshot) withViews() []*snapshot {
	out := []*snapshot{s}
	for _, v := range s.views {
		out = append(out, v)
	}
	return out
}

// setGen gives the snapshot and its views generation g.
func (s *snapshot) setGen(g uint64) {
	for _, v := range s.withViews() {
		v.gen = g
	}
}

// publish builds the generation after s: the default snapshot and every
// view, each from the changes as its clients see them.
func (s *snapshot) publish(changes []rolloutChange, env envoyConfig) (*snapshot, bool, error) {
	parents := changedParents(changes)
	if len(parents) == 0 && len(s.views) == 0 {
		return s.next(changes, env) // no rollout across clusters: one snapshot
	}
	parts := s.partsAfter(parents, changes)
	withFailover := map[api.Key]*Resources{}
	for _, ps := range parts {
		res, err := failoverResources(ps)
		if err != nil {
			return nil, false, err
		}
		maps.Copy(withFailover, res)
	}
	def, changed, err := s.next(viewChanges("", changes, parts, withFailover), env)
	if err != nil {
		return nil, false, err
	}
	def.views = map[string]*snapshot{}
	for _, v := range viewNames(s.views, parts) {
		base := s.views[v]
		if base == nil {
			// A new view starts as the default one: every host's routes
			// are those of its default part until a part in v says
			// otherwise (and the parts of v are all in changes).
			base = &snapshot{gen: s.gen, rollouts: s.rollouts, hosts: s.hosts, types: s.types}
		}
		vs, ch, err := base.next(viewChanges(v, changes, parts, withFailover), env)
		if err != nil {
			return nil, false, err
		}
		def.views[v] = vs
		changed = changed || ch
	}
	def.setGen(def.gen)
	return def, changed, nil
}

// changedParents are the rollouts across clusters some change touches.
func changedParents(changes []rolloutChange) []api.Key {
	var out []api.Key
	for _, c := range changes {
		if c.key.Cluster() != "" && !slices.Contains(out, c.key.Parent()) {
			out = append(out, c.key.Parent())
		}
	}
	return out
}

// partsAfter are the parts of each parent once changes apply, by key; a
// removed part maps to nil.
func (s *snapshot) partsAfter(parents []api.Key, changes []rolloutChange) map[api.Key]map[api.Key]*rolloutState {
	out := map[api.Key]map[api.Key]*rolloutState{}
	for _, p := range parents {
		parts := map[api.Key]*rolloutState{}
		prefix := rolloutTreeKey(p.InCluster(""))
		s.rollouts.Root().WalkPrefix(prefix, func(_ []byte, ro *rolloutState) bool {
			parts[ro.traffic.Rollout] = ro
			return false
		})
		out[p] = parts
	}
	for _, c := range changes {
		if c.key.Cluster() != "" {
			out[c.key.Parent()][c.key] = c.ro
		}
	}
	return out
}

// viewNames are the views after a publish: the old ones and the cluster
// of every part.
func viewNames(old map[string]*snapshot, parts map[api.Key]map[api.Key]*rolloutState) []string {
	var out []string
	for v := range old {
		out = append(out, v)
	}
	for _, ps := range parts {
		for k, ro := range ps {
			if ro != nil && !slices.Contains(out, k.Cluster()) {
				out = append(out, k.Cluster())
			}
		}
	}
	slices.Sort(out)
	return out
}

// viewChanges are changes as view v applies them: other rollouts' as they
// are, and every part of a touched parent again (with its resources res,
// failover endpoints included), each with the routes of its host only
// when it is v's front part. Removals come first and the front part last,
// so that a host is free when its new front takes it.
func viewChanges(v string, changes []rolloutChange, parts map[api.Key]map[api.Key]*rolloutState, res map[api.Key]*Resources) []rolloutChange {
	var out, backs, fronts []rolloutChange
	for _, c := range changes {
		if c.key.Cluster() == "" {
			out = append(out, c)
		}
	}
	for _, ps := range parts {
		front := frontPart(v, ps)
		for _, k := range sortedPartKeys(ps) {
			ro := ps[k]
			if ro == nil {
				out = append(out, rolloutChange{key: k})
				continue
			}
			cp := *ro
			cp.owned, cp.backOnly = nil, k != front
			if cp.backOnly {
				cp.vhost = nil
				backs = append(backs, rolloutChange{key: k, ro: &cp, res: res[k]})
			} else {
				fronts = append(fronts, rolloutChange{key: k, ro: &cp, res: res[k]})
			}
		}
	}
	return append(append(out, backs...), fronts...)
}

// frontPart is the part whose routes view v's clients get for the host:
// the part in cluster v, else the part marked DefaultRoutes, else the
// part of the highest wave (the last by key among equals).
func frontPart(v string, parts map[api.Key]*rolloutState) api.Key {
	var def, top api.Key
	topWave := -1
	for _, k := range sortedPartKeys(parts) {
		ro := parts[k]
		if ro == nil {
			continue
		}
		if v != "" && k.Cluster() == v {
			return k
		}
		if ro.traffic.DefaultRoutes && def == (api.Key{}) {
			def = k
		}
		if ro.traffic.Wave >= topWave {
			top, topWave = k, ro.traffic.Wave
		}
	}
	if def != (api.Key{}) {
		return def
	}
	return top
}

func sortedPartKeys(parts map[api.Key]*rolloutState) []api.Key {
	keys := make([]api.Key, 0, len(parts))
	for k := range parts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b api.Key) int { return cmpStr(a.String(), b.String()) })
	return keys
}
