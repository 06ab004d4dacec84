package rollout

import "reflect"

// This file keeps the actuator's readiness reports (PodsReady), in
// Kubernetes mode, and lets a wait for pods go on when one arrives.

// pods is the latest PodsReady for hash.
func (s State) pods(hash string) PodsReady {
	for _, p := range s.Pods {
		if p.Hash == hash {
			return p
		}
	}
	return PodsReady{Hash: hash}
}

// forgetScaledDown forgets the reports of the sets that leave the desired
// sets (they go to 0): if one comes back (a retry, a version pushed
// again), its old Ready count must not let traffic through before the
// actuator reports it anew.
func (m *machine) forgetScaledDown(sets []WorkloadSet) {
	for _, w := range m.s.Workloads {
		if hasHash(sets, w.Hash) {
			continue
		}
		var keep []PodsReady
		for _, p := range m.s.Pods {
			if p.Hash != w.Hash {
				keep = append(keep, p)
			}
		}
		m.s.Pods = keep
	}
}

// prunePods forgets reports of hashes the rollout no longer runs once
// they have no pods left.
func (m *machine) prunePods() {
	var keep []PodsReady
	for _, p := range m.s.Pods {
		known := false
		for _, w := range m.s.Workloads {
			known = known || w.Hash == p.Hash
		}
		if known || p.Replicas > 0 || p.Ready > 0 {
			keep = append(keep, p)
		}
	}
	m.s.Pods = keep
}

// podsReady records the latest report for a hash and lets a wait go on.
func (m *machine) podsReady(e PodsReady) {
	if !m.s.kubernetes() || e.Hash == "" {
		return
	}
	found := false
	for i := range m.s.Pods {
		if m.s.Pods[i].Hash == e.Hash {
			m.s.Pods[i] = e
			found = true
		}
	}
	if !found {
		m.s.Pods = append(m.s.Pods, e)
	}
	if !m.s.Removed {
		m.continueWait()
		m.experimentProgress()
	}
}

// PodCountOnly says that the step from old to next, made by ev with acts,
// recorded only how many pods a version has, not how many are Ready:
// the report left that version's Ready count as it was and emitted no
// action, and nothing else moved but the counts, the status and message
// derived from them, and Seq. The machine decides on Ready counts alone
// (a pod count is status), and after a restart or a failover the
// actuator reports every set again once it has applied the sets, so a
// state lost with such a step is learnt again: the runner need not store
// it before the next step (in Kubernetes mode, a write to the apiserver
// each time pods are created or deleted while none more turn Ready).
func PodCountOnly(old, next State, ev Event, acts []Action) bool {
	e, ok := ev.(PodsReady)
	if !ok || len(acts) > 0 || old.pods(e.Hash).Ready != e.Ready {
		return false
	}
	return reflect.DeepEqual(old.withoutPodCounts(), next.withoutPodCounts())
}

// withoutPodCounts is s without its pod counts and what is derived from
// them: a report of no Ready pods is the same as none.
func (s State) withoutPodCounts() State {
	c := s
	c.Seq, c.Message = 0, ""
	c.Pods = nil
	for _, p := range s.Pods {
		if p.Ready > 0 {
			c.Pods = append(c.Pods, PodsReady{Hash: p.Hash, Ready: p.Ready})
		}
	}
	c.Workloads = cloneSlice(s.Workloads)
	for i := range c.Workloads {
		c.Workloads[i].Replicas = 0
	}
	return c
}
