package workload

import (
	"context"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sluice-dev/sluice/api"
)

// createdBySluice says the applied ReplicaSet's template was only ever
// written by sluice: its first generation, and no other field manager of
// its spec. Every pod its controller created then carries sluice's labels,
// so applySet lists none to label (a new version's first apply: one
// request fewer per change).
func createdBySluice(rs *appsv1.ReplicaSet) bool {
	if rs.Generation != 1 {
		return false
	}
	for _, f := range rs.ManagedFields {
		if f.Subresource == "" && f.Manager != FieldManager {
			return false
		}
	}
	return true
}

// podsUnlabelled says the ReplicaSet controller has seen the set's current
// template and counts pods of the set without all of its labels: orphans
// it adopted (pods matching the selector, left by a ReplicaSet of the same
// hash deleted with its pods orphaned) or pods whose labels someone
// removed. sluice's pod cache holds only pods with sluice's labels, so
// such pods would count neither as Ready nor as endpoints, and the
// controller, which counts them, would create no other.
func podsUnlabelled(rs *appsv1.ReplicaSet) bool {
	return rs.Generation > 0 && rs.Status.ObservedGeneration == rs.Generation &&
		rs.Status.FullyLabeledReplicas < rs.Status.Replicas
}

// relabels runs labelAdoptedPods in the background for the sets whose
// status says pods lack their labels (report calls it for every set it
// reads), once per status of the set: a set is tried again when its
// ReplicaSet changes, or relabelRetry after a failure, not on every pod
// event meanwhile.
type relabels struct {
	mu sync.Mutex
	// tried holds the resourceVersion of each set when it was last tried.
	tried map[types.NamespacedName]string
}

// relabelIfNeeded starts labelling rs's pods if they need it and this
// version of rs was not tried yet.
func (m *Manager) relabelIfNeeded(key api.Key, rs *appsv1.ReplicaSet) {
	if !podsUnlabelled(rs) || m.runCtx == nil {
		return
	}
	name := types.NamespacedName{Namespace: rs.Namespace, Name: rs.Name}
	m.relabels.mu.Lock()
	if m.relabels.tried[name] == rs.ResourceVersion {
		m.relabels.mu.Unlock()
		return
	}
	m.relabels.tried[name] = rs.ResourceVersion
	m.relabels.mu.Unlock()
	go func(ctx context.Context) {
		select {
		case m.scaleSlots <- struct{}{}:
			defer func() { <-m.scaleSlots }()
		case <-ctx.Done():
			return
		}
		if err := m.labelAdoptedPods(ctx, key, rs); err != nil {
			m.log.Warn("label pods of a ReplicaSet; trying again", "rollout", key.String(), "replicaset", rs.Name, "in", relabelRetry, "err", err)
			time.AfterFunc(relabelRetry, func() {
				m.relabels.forget(rs)
				m.queue.Add(key) // report, and so this check, again
			})
		}
	}(m.runCtx)
}

// relabelRetry is how long a failed labelling waits to be tried again.
const relabelRetry = 5 * time.Second

// forget drops what was tried of a ReplicaSet that is gone.
func (r *relabels) forget(rs *appsv1.ReplicaSet) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.tried, types.NamespacedName{Namespace: rs.Namespace, Name: rs.Name})
}
