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
		sets = append(sets, WorkloadSet{Role: RoleCanary, Version: s.CanaryVersion, Hash: s.CanaryHash, Replicas: s.canaryReplicas(), Spec: s.Spec, At: s.canaryAt(), Aborted: s.Aborted})
	}
	if h, ok := s.baseline(); ok {
		sets = append(sets, WorkloadSet{Role: RoleBaseline, Version: s.StableVersion, Hash: h, Replicas: s.baselineReplicas(h), Spec: stableSpec})
	}
	for _, e := range s.experimentSets() {
		if !hasHash(sets, e.Hash) {
			sets = append(sets, e)
		}
	}
	for _, d := range s.Drains {
		// A draining version keeps its pods, and more if the rollout's
		// replicas grew while clients may still route to it.
		n := max(d.Replicas, s.replicasFor(s.share(d.Hash)))
		if hasHash(sets, d.Hash) || n == 0 {
			continue
		}
		old := WorkloadSet{Role: RoleOld, Version: d.Version, Hash: d.Hash, Replicas: n, Spec: d.Spec}
		if s.Aborted && d.Hash == s.CanaryHash {
			// The aborted canary keeps its mark, and the step it was
			// aborted at, while it drains.
			old.At, old.Aborted = s.canaryAt(), true
		}
		sets = append(sets, old)
	}
	return sets
}

// canaryAt is the canary's position, written on its ReplicaSet.
func (s State) canaryAt() *Position {
	return &Position{Step: s.StepIndex, Weight: s.Weights.Canary}
}

// markedAborted is the hash of the set among sets marked aborted, "" when
// none.
func markedAborted(sets []WorkloadSet) string {
	for _, w := range sets {
		if w.Aborted {
			return w.Hash
		}
	}
	return ""
}

// markedAt is the position on the canary's set among sets, nil when none.
func markedAt(sets []WorkloadSet) *Position {
	for _, w := range sets {
		if w.Role == RoleCanary {
			return w.At
		}
	}
	return nil
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
	if at := markedAt(sets); !reflect.DeepEqual(at, m.s.Marked) {
		// The canary moved: its ReplicaSet says so before anything else.
		m.s.Marked, changed = at, true
	}
	m.prunePods()
	aborted := markedAborted(sets)
	newMark := aborted != "" && aborted != m.s.MarkedAborted
	if aborted != m.s.MarkedAborted {
		m.s.MarkedAborted, changed = aborted, true
	}
	if !changed && !force || m.s.StableHash == "" {
		return
	}
	m.s.WorkloadGen++
	// An abort's mark goes on the canary's ReplicaSet before the traffic
	// moves back (and again first after a restart): a state lost after the
	// move must find it. Anything else follows the Step's SetTraffic.
	scale := ScaleWorkloads{Rollout: m.s.Key, Gen: m.s.WorkloadGen, Sets: sets, Ahead: aborted != "" && (newMark || force)}
	at := 0
	if m.trafficDirty && !scale.Ahead {
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
