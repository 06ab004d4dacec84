package rollout

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
