package workload

import (
	"cmp"
	"maps"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/rollout"
)

// rolloutReport is what the callbacks were last told about one rollout,
// per hash.
type rolloutReport struct {
	ready     map[string]rollout.PodsReady
	endpoints map[string]string // fingerprint of Endpoints(key, hash)
}

// Readiness is the current PodsReady of every ReplicaSet of the rollout
// (sorted by hash), as OnReady reports it: the runner asks after Scale on a
// restart, so that no change is lost while it was down.
func (m *Manager) Readiness(key api.Key) []rollout.PodsReady {
	var out []rollout.PodsReady
	for _, rs := range m.replicaSetsOf(key) {
		addrs, _ := m.Endpoints(key, rs.Labels[LabelHash])
		out = append(out, readinessOf(rs, len(addrs)))
	}
	slices.SortFunc(out, func(a, b rollout.PodsReady) int { return cmp.Compare(a.Hash, b.Hash) })
	return out
}

// readinessOf counts the ReplicaSet's pods and its Ready ones; Ready is
// also capped by the endpoints that would carry traffic, since the
// ReplicaSet's status and the EndpointSlices are updated by different
// controllers at different moments: traffic pushed because N pods are
// Ready must find N endpoints.
func readinessOf(rs *appsv1.ReplicaSet, endpoints int) rollout.PodsReady {
	ready := min(rs.Status.ReadyReplicas, int32(endpoints))
	if rs.Annotations[AnnotationRole] == string(rollout.RoleExperiment) {
		// An experiment's pods carry no traffic: Ready is Ready.
		ready = rs.Status.ReadyReplicas
	}
	return rollout.PodsReady{
		Hash:     rs.Labels[LabelHash],
		Replicas: rs.Status.Replicas,
		Ready:    ready,
	}
}

// work reports the rollouts the informers enqueue, one at a time.
func (m *Manager) work() {
	for {
		key, shutdown := m.queue.Get()
		if shutdown {
			return
		}
		m.report(key)
		m.queue.Done(key)
	}
}

// report compares the rollout's readiness and endpoints with what was last
// reported and calls OnReady per changed hash (a ReplicaSet gone reports
// 0/0) and OnEndpoints once if any version's endpoints changed.
func (m *Manager) report(key api.Key) {
	now := rolloutReport{ready: map[string]rollout.PodsReady{}, endpoints: map[string]string{}}
	for _, rs := range m.replicaSetsOf(key) {
		m.relabelIfNeeded(key, rs)
		hash := rs.Labels[LabelHash]
		addrs, zones := m.Endpoints(key, hash)
		now.ready[hash] = readinessOf(rs, len(addrs))
		now.endpoints[hash] = fingerprint(addrs, zones)
	}
	last := m.reported[key]
	if m.takeForced(key) {
		last = rolloutReport{}
	}
	for _, hash := range sortedKeys(now.ready) {
		if r, ok := last.ready[hash]; !ok || r != now.ready[hash] {
			m.onReady(key, now.ready[hash])
		}
	}
	for _, hash := range sortedKeys(last.ready) {
		if _, ok := now.ready[hash]; !ok {
			m.onReady(key, rollout.PodsReady{Hash: hash})
		}
	}
	if !maps.Equal(last.endpoints, now.endpoints) {
		m.onEndpoints(key)
	}
	if len(now.ready) == 0 {
		delete(m.reported, key)
		return
	}
	m.reported[key] = now
}

// fingerprint is one version's endpoints and zones as one comparable string.
func fingerprint(addrs []string, zones map[string]string) string {
	var b strings.Builder
	for _, a := range addrs {
		b.WriteString(a)
		b.WriteByte('@')
		b.WriteString(zones[a])
		b.WriteByte(' ')
	}
	return b.String()
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
