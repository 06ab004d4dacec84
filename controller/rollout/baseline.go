package rollout

import (
	"time"

	"github.com/sluice-dev/sluice/api"
)

// This file runs, in Kubernetes mode, the baseline of a rollout whose
// analysis uses sluice.io/judge (api.Workload.Baseline): fresh pods of the
// stable version, started with the canary and as many, that take the
// canary's share of traffic from stable, so that the judge compares the
// canary with pods of the same age and load rather than with the
// long-running stable. The baseline goes away with the canary: it drains
// (ACK, then the canary's scale-down delay) wherever the canary does.

// RoleBaseline is the baseline's WorkloadSet: the stable version's
// template with api.BaselineLabel, under its own pod-template hash.
const RoleBaseline WorkloadRole = "baseline"

// wantsBaseline reports whether the rollout in force runs a baseline
// beside its canaries.
func (s State) wantsBaseline() bool {
	return s.kubernetes() && s.Spec.Workload.Baseline
}

// stableSpecOrSpec is the rollout whose template builds the stable pods.
func (s State) stableSpecOrSpec() *api.Rollout {
	if s.StableSpec != nil {
		return s.StableSpec
	}
	return s.Spec
}

// baseline is the pod-template hash of the baseline running now: while a
// canary of another pod template takes traffic (or waits to), for a
// rollout that wants one.
func (s State) baseline() (string, bool) {
	h := s.canaryBaseline()
	return h, h != "" && s.canaryServed()
}

// canaryBaseline is the hash of the current canary's baseline, served or
// not (an aborted canary's, which may still have pods): "" without a
// canary or when it started without a baseline.
func (s State) canaryBaseline() string {
	if s.CanaryVersion == "" || !s.kubernetes() {
		return ""
	}
	return s.BaselineHash
}

// newBaselineHash is the baseline a canary starting now runs beside: the
// stable's baseline hash when the rollout wants one and the canary has
// another pod template, else "". It is fixed for the canary's life
// (State.BaselineHash), so a strategy edit mid-canary neither starts nor
// drops a baseline that traffic may depend on.
func (s State) newBaselineHash() string {
	if !s.wantsBaseline() || s.CanaryHash == "" || s.CanaryHash == s.StableHash {
		return ""
	}
	if st := s.stableSpecOrSpec(); st.Workload != nil {
		return st.Workload.BaselineHash
	}
	return ""
}

// baselineReplicas is the baseline's size: the canary's while the canary
// steps, and never below what the traffic it may be getting needs; during
// a promotion or an abort that has not moved traffic yet it keeps what it
// runs.
func (s State) baselineReplicas(hash string) int32 {
	n := s.replicasFor(s.share(hash))
	if s.CanaryActive() && s.StepIndex < s.StepCount() {
		return max(n, s.canaryReplicas())
	}
	return max(n, s.desired(hash))
}

// routedWeights is the split clients get: s.Weights, three ways while a
// baseline runs.
func (s State) routedWeights() api.Weights {
	if _, ok := s.baseline(); ok {
		return s.Weights.WithBaseline()
	}
	return s.Weights
}

// baselineTraffic fills t's baseline side: the baseline pods while one
// runs, the stable's otherwise, so that the baseline cluster exists for
// as long as the rollout wants a baseline.
func (s State) baselineTraffic(t *api.Traffic) {
	h, running := s.baseline()
	if !s.wantsBaseline() && !running || s.StableHash == "" {
		return
	}
	t.BaselineVersion, t.BaselineWorkload = s.StableVersion, s.StableHash
	if running {
		t.BaselineWorkload = h
		t.Weights = s.Weights.WithBaseline()
	}
}

// baselineRun is the baseline running at one moment, kept across a
// change of the state so that it can drain.
type baselineRun struct {
	version, hash string
	spec          *api.Rollout
}

// runningBaseline is the current canary's baseline (hash "" when none);
// drain skips it if it runs no pods and gets no traffic.
func (s State) runningBaseline() baselineRun {
	h := s.canaryBaseline()
	if h == "" {
		return baselineRun{}
	}
	return baselineRun{version: s.StableVersion, hash: h, spec: s.stableSpecOrSpec()}
}

// drainBaseline lets a baseline that stops keep its pods until the ACK of
// the traffic pushed in this Step plus delay; one that runs on (a new
// canary against the same stable) keeps its role.
func (m *machine) drainBaseline(b baselineRun, delay time.Duration) {
	if h, ok := m.s.baseline(); b.hash == "" || ok && h == b.hash {
		return
	}
	m.drain(b.version, b.hash, b.spec, delay)
}

// hashArgs adds the pod-template hashes to a run's built-in arguments in
// Kubernetes mode, for queries that select pods by their
// rollouts-pod-template-hash label: the judge compares canary-hash with
// baseline-hash (set only while a baseline runs).
func (m *machine) hashArgs(args map[string]string) {
	if !m.s.kubernetes() {
		return
	}
	args[api.ArgStableHash] = m.s.StableHash
	if m.s.CanaryHash != "" {
		args[api.ArgCanaryHash] = m.s.CanaryHash
	}
	if h, ok := m.s.baseline(); ok {
		args[api.ArgBaselineHash] = h
	}
}
