package workload

import (
	"cmp"
	"slices"
	"strconv"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/rollout"
)

// ReplicaSetStatus is one of a rollout's ReplicaSets as the API and the
// CLI (`sluice get rollout`) show it; Status fills all but the pending
// pods, which the binder knows.
type ReplicaSetStatus = rollout.ReplicaSetStatus

// Status lists the rollout's ReplicaSets, newest revision first.
func (m *Manager) Status(key api.Key) []ReplicaSetStatus {
	var out []ReplicaSetStatus
	for _, rs := range m.replicaSetsOf(key) {
		s := ReplicaSetStatus{
			Name:     rs.Name,
			Hash:     rs.Labels[LabelHash],
			Version:  rs.Annotations[AnnotationVersion],
			Role:     rs.Annotations[AnnotationRole],
			Replicas: rs.Status.Replicas,
			Ready:    rs.Status.ReadyReplicas,
			Desired:  1,
		}
		s.Revision, _ = strconv.ParseInt(rs.Annotations[AnnotationRevision], 10, 64)
		if rs.Spec.Replicas != nil {
			s.Desired = *rs.Spec.Replicas
		}
		for _, p := range m.podsOf(key, s.Hash) {
			if !servesTraffic(p) {
				continue
			}
			if z := m.zoneOf(p.Spec.NodeName); z != "" {
				if s.Zones == nil {
					s.Zones = map[string]int{}
				}
				s.Zones[z]++
			}
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b ReplicaSetStatus) int {
		return cmp.Or(cmp.Compare(b.Revision, a.Revision), cmp.Compare(a.Name, b.Name))
	})
	return out
}
