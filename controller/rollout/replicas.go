package rollout

import (
	"reflect"

	"github.com/sluice-dev/sluice/api"
)

// This file decides, in Kubernetes mode, how many pods each version runs
// (Argo Rollouts' rules for a traffic-routed canary) and emits them as one
// declarative ScaleWorkloads per Step.

// WorkloadStatus is one set of the last ScaleWorkloads with what the
// cluster reports for it, for status: Desired pods asked for, Replicas
// existing and Ready.
type WorkloadStatus struct {
	Role     WorkloadRole `json:"role"`
	Version  string       `json:"version"`
	Hash     string       `json:"hash"`
	Desired  int32        `json:"desired"`
	Replicas int32        `json:"replicas"`
	Ready    int32        `json:"ready"`
}

// Share is the largest share of traffic (percent) a pod-template hash may
// be getting while clients move between routing tables.
type Share struct {
	Hash   string `json:"hash"`
	Weight int32  `json:"weight"`
}

// kubernetes reports whether sluice runs the rollout's pods: a rollout
// without a pod-template hash has no ReplicaSet to run, and moves traffic
// as in standalone mode.
func (s State) kubernetes() bool { return specHash(s.Spec) != "" }

// workload is the Kubernetes-mode configuration in force.
func (s State) workload() api.Workload {
	if !s.kubernetes() {
		return api.Workload{}
	}
	return *s.Spec.Workload
}

// specHash is r's pod-template hash ("" in standalone mode).
func specHash(r *api.Rollout) string {
	if r == nil || r.Workload == nil {
		return ""
	}
	return r.Workload.PodTemplateHash
}

// replicasFor is how many pods a side needs to take weight percent of the
// traffic: Argo's trafficWeightToReplicas (utils/replicaset/canary.go),
// ceil(replicas × weight / 100), raised to minPodsPerReplicaSet (capped at
// replicas, as Argo's CheckMinPodsPerReplicaSet does) when the side gets
// traffic at all.
func (s State) replicasFor(weight int32) int32 {
	if weight <= 0 {
		return 0
	}
	replicas := s.Spec.Replicas
	n := (replicas*min(weight, 100) + 99) / 100 // ceil(replicas × weight / 100)
	return max(n, min(s.workload().MinPodsPerReplicaSet, replicas))
}

// canaryScaleAt is the setCanaryScale in force at step i: the latest one
// at or before it, nil when there is none or it is matchTrafficWeight
// (Argo's UseSetCanaryScale). It persists across later steps.
func canaryScaleAt(steps []api.Step, i int32) *api.CanaryScale {
	for j := min(int(i), len(steps)-1); j >= 0; j-- {
		scs := steps[j].CanaryScale
		if scs == nil {
			continue
		}
		if scs.MatchTrafficWeight || (scs.Replicas == nil && scs.Weight == nil) {
			return nil
		}
		return scs
	}
	return nil
}

// canaryCount is the canary's size for traffic weight with the
// setCanaryScale in force at step upto: an exact replicas count, that
// percent of the rollout's replicas, or the weight's pods (Argo's
// GetCanaryReplicasOrWeight).
func (s State) canaryCount(weight, upto int32) int32 {
	scs := canaryScaleAt(s.Steps(), upto)
	switch {
	case scs == nil:
		return s.replicasFor(weight)
	case scs.Replicas != nil:
		return max(*scs.Replicas, 0)
	default:
		return s.replicasFor(*scs.Weight)
	}
}

// share is the largest share hash may be getting.
func (s State) share(hash string) int32 {
	for _, sh := range s.Shares {
		if sh.Hash == hash {
			return sh.Weight
		}
	}
	return 0
}

// pods is the latest PodsReady for hash.
func (s State) pods(hash string) PodsReady {
	for _, p := range s.Pods {
		if p.Hash == hash {
			return p
		}
	}
	return PodsReady{Hash: hash}
}

// canaryServed reports whether the canary side of the traffic carries the
// canary version: a canary in flight, or an aborted one whose traffic has
// not moved back yet (it waits for stable pods). A removed rollout keeps
// its traffic as it was.
func (s State) canaryServed() bool {
	if s.CanaryVersion == "" {
		return false
	}
	return !s.Aborted || s.Wait != nil && s.Wait.Kind == WaitAbort
}

// trafficShares are the shares of traffic t gives each pod-template hash.
func trafficShares(t api.Traffic) []Share {
	if t.StableWorkload == t.CanaryWorkload {
		return []Share{{Hash: t.StableWorkload, Weight: t.Weights.Stable + t.Weights.Canary}}
	}
	return []Share{{Hash: t.StableWorkload, Weight: t.Weights.Stable}, {Hash: t.CanaryWorkload, Weight: t.Weights.Canary}}
}

// sharePushed records traffic just pushed: until its ACK, clients may
// route by the previous table or this one, so each hash keeps the larger
// of the two shares.
func (m *machine) sharePushed(t api.Traffic) {
	for _, sh := range trafficShares(t) {
		found := false
		for i := range m.s.Shares {
			if m.s.Shares[i].Hash == sh.Hash {
				m.s.Shares[i].Weight = max(m.s.Shares[i].Weight, sh.Weight)
				found = true
			}
		}
		if !found && sh.Weight > 0 {
			m.s.Shares = append(m.s.Shares, sh)
		}
	}
}

// shareAcked narrows the shares to the traffic in force once clients ACK
// the latest generation; an ACK of an older one proves nothing about
// what was pushed after it.
func (m *machine) shareAcked(gen uint64) {
	if !m.s.kubernetes() || gen < m.s.TrafficGen || m.s.TrafficGen == 0 || m.s.Wait != nil && m.s.Wait.Kind == WaitFirst {
		return
	}
	var shares []Share
	for _, sh := range trafficShares(m.s.Traffic()) {
		if sh.Weight > 0 {
			shares = append(shares, sh)
		}
	}
	m.s.Shares = shares
}

// stableReplicas is the stable's size. It stays at the rollout's replicas
// unless dynamicStableScale, where it follows the stable's share: it
// shrinks only once clients ACK the weight that moved traffic away (the
// share keeps the pre-ACK weight) and grows ahead of traffic coming back
// (a wait asks for it before the weight moves).
func (s State) stableReplicas() int32 {
	if !s.workload().DynamicStableScale {
		return s.Spec.Replicas
	}
	n := s.replicasFor(s.share(s.StableHash))
	if s.Wait != nil {
		n = max(n, s.Wait.Stable)
	}
	return n
}

// canaryReplicas is the canary's size: its weight's pods (or the
// setCanaryScale in force), never below what the traffic it may be getting
// needs, and the rollout's replicas once it is being promoted. sluice
// departs from Argo in one point: setCanaryScale cannot shrink the canary
// below the pods its traffic needs.
func (s State) canaryReplicas() int32 {
	if s.StepIndex >= s.StepCount() && s.CanaryActive() {
		return s.Spec.Replicas
	}
	upto := s.StepIndex
	if s.Cursor == CursorEnter || s.Cursor == CursorAwaitPods {
		upto-- // the step's own setCanaryScale applies once it is entered
	}
	n := max(s.canaryCount(s.Weights.Canary, upto), s.replicasFor(s.share(s.CanaryHash)))
	if s.Wait != nil {
		n = max(n, s.Wait.Canary)
	}
	if s.Aborted {
		// Traffic is still on the aborted canary: keep what it runs.
		n = max(n, s.desired(s.CanaryHash))
	}
	return n
}

// desired is the size hash had in the last ScaleWorkloads.
func (s State) desired(hash string) int32 {
	for _, w := range s.Workloads {
		if w.Hash == hash {
			return w.Desired
		}
	}
	return 0
}

// desiredSets are the pods the rollout should run now.
func (s State) desiredSets() []WorkloadSet {
	if !s.kubernetes() || s.Removed || s.StableHash == "" {
		return nil
	}
	stableSpec := s.StableSpec
	if stableSpec == nil {
		stableSpec = s.Spec
	}
	sets := []WorkloadSet{{Role: RoleStable, Version: s.StableVersion, Hash: s.StableHash, Replicas: s.stableReplicas(), Spec: stableSpec}}
	if s.canaryServed() && s.CanaryHash != "" && s.CanaryHash != s.StableHash {
		sets = append(sets, WorkloadSet{Role: RoleCanary, Version: s.CanaryVersion, Hash: s.CanaryHash, Replicas: s.canaryReplicas(), Spec: s.Spec})
	}
	for _, d := range s.Drains {
		// A draining version keeps its pods, and more if the rollout's
		// replicas grew while clients may still route to it.
		n := max(d.Replicas, s.replicasFor(s.share(d.Hash)))
		if !hasHash(sets, d.Hash) && n > 0 {
			sets = append(sets, WorkloadSet{Role: RoleOld, Version: d.Version, Hash: d.Hash, Replicas: n, Spec: d.Spec})
		}
	}
	return sets
}

func hasHash(sets []WorkloadSet, hash string) bool {
	for _, w := range sets {
		if w.Hash == hash {
			return true
		}
	}
	return false
}

// flushWorkloads emits one ScaleWorkloads when the desired sets changed
// (or force, on restart), right after the Step's SetTraffic, and refreshes
// the status of the sets.
func (m *machine) flushWorkloads(force bool) {
	if !m.s.kubernetes() || m.s.Removed {
		return // a removed rollout's pods are left as they are
	}
	m.dropActiveDrains()
	sets := m.s.desiredSets()
	m.forgetScaledDown(sets)
	var status []WorkloadStatus
	for _, w := range sets {
		p := m.s.pods(w.Hash)
		status = append(status, WorkloadStatus{Role: w.Role, Version: w.Version, Hash: w.Hash, Desired: w.Replicas, Replicas: p.Replicas, Ready: p.Ready})
	}
	changed := !reflect.DeepEqual(withoutPods(status), withoutPods(m.s.Workloads))
	m.s.Workloads = status
	m.prunePods()
	if !changed && !force || m.s.StableHash == "" {
		return
	}
	m.s.WorkloadGen++
	scale := ScaleWorkloads{Rollout: m.s.Key, Gen: m.s.WorkloadGen, Sets: sets}
	at := 0
	if m.trafficDirty {
		at = 1 // after the Step's SetTraffic
	}
	m.acts = append(m.acts[:at:at], append([]Action{scale}, m.acts[at:]...)...)
}

// withoutPods keeps what ScaleWorkloads asks for: role, version, hash and
// desired size.
func withoutPods(ws []WorkloadStatus) []WorkloadStatus {
	out := make([]WorkloadStatus, 0, len(ws))
	for _, w := range ws {
		w.Replicas, w.Ready = 0, 0
		out = append(out, w)
	}
	return out
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
	}
}
