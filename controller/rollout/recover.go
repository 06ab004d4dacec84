package rollout

import (
	"fmt"

	"github.com/sluice-dev/sluice/api"
)

// A record lost (a wiped state dir, a failover onto an empty store, a pod
// restart on an emptyDir) must never promote: sluice's record is a cache
// of what it did, and what it did outlived the record in git's history
// and, in Kubernetes mode, in the cluster (DESIGN §14). The daemon reads
// those and feeds Recovered instead of the Change of a rollout it has no
// record of; the machine only decides from what it is told. Recovery may
// hold or repeat steps, never skip them.

// RecoverySource says where a recovered position was read.
type RecoverySource string

// Recovery sources.
const (
	// RecoveredFromGit: an earlier commit of the rollout's file held
	// another version; it is stable and the current one runs from step 1.
	RecoveredFromGit RecoverySource = "git"
	// RecoveredFromCluster: sluice's ReplicaSets say which version serves
	// stable traffic and where a canary stood.
	RecoveredFromCluster RecoverySource = "cluster"
)

// HoldRecovered holds a canary found in the cluster after a state loss at
// the step it stood at: promote completes that step, resume runs its
// window (pause or analysis) again, abort goes back to stable.
const HoldRecovered HoldKind = "Recovered"

// Recovered rebuilds a rollout sluice has no record of, from commit
// Commit. Stable is the rollout of the version found serving stable
// traffic. Canary, when set, is a different version to run as a canary:
// with Step < 0 from the first step (git); with Step ≥ 0 held at that
// step, whose traffic (canary weight Weight, never more than the step
// asks for) was in force when the record was lost (cluster). Found says
// what was found, for the message and the alert. Draining are the sets
// found draining (a former stable, an aborted canary): clients may still
// route to them, so they keep their pods until the ACK of the recovered
// traffic and a whole scale-down delay after it (Kubernetes mode).
type Recovered struct {
	Commit string         `json:"commit"`
	Source RecoverySource `json:"source"`
	Stable *api.Rollout   `json:"stable"`
	Canary *api.Rollout   `json:"canary,omitempty"`
	Step   int32          `json:"step"`
	Weight int32          `json:"weight"`
	Found  string         `json:"found"`
	// Aborted: the canary's set carries the abort mark (cluster). The
	// canary comes back aborted, at Step, with all traffic to stable; its
	// set, listed in Draining, keeps its pods until the ACK of that and a
	// whole scale-down delay after it.
	Aborted bool `json:"aborted,omitempty"`
	// Draining needs Version, Hash, Replicas and Spec; the machine sets
	// the delay and the generation.
	Draining []Drain `json:"draining,omitempty"`
}

func (Recovered) isEvent() {}

// recovered applies a Recovered. A rollout that has a record already takes
// it as the plain change it would have been: recovery only fills a gap.
func (m *machine) recovered(e Recovered) {
	current := e.Canary
	if current == nil {
		current = e.Stable
	}
	if current == nil {
		return
	}
	if m.s.Spec != nil && m.s.StableVersion != "" {
		m.change(Change{Commit: e.Commit, Class: ClassNewVersion, Rollout: current})
		return
	}
	m.s.Key = current.Key
	m.s.Removed, m.s.Errors, m.s.ErrorCommit = false, nil, ""
	switch {
	case e.Canary == nil:
		m.first(e.Commit, e.Stable)
		m.alert(AlertStateRecovered, e.Commit, fmt.Sprintf("recovered from %s after a state loss: %s; %s stays stable", sourceText(e.Source), e.Found, e.Stable.Version))
	case e.Aborted:
		m.adoptStable(e.Commit, e.Stable)
		m.resumeAborted(e)
	case e.Step < 0:
		m.adoptStable(e.Commit, e.Stable)
		m.alert(AlertStateRecovered, e.Commit, fmt.Sprintf("recovered from %s after a state loss: %s; %s stays stable and %s runs as a canary from step 1", sourceText(e.Source), e.Found, e.Stable.Version, e.Canary.Version))
		m.newCanary(e.Commit, e.Canary)
	default:
		m.adoptStable(e.Commit, e.Stable)
		m.resumeHeld(e)
	}
	m.keepDraining(e.Draining)
}

// keepDraining keeps the pods of the sets found draining, as drains whose
// delay starts on the ACK of the traffic this Step pushes, or of the next
// push when it pushes none (the first version waiting for its pods): the
// delay they had left was lost with the record, so they get a whole one,
// the longer of the two the rollout declares.
func (m *machine) keepDraining(found []Drain) {
	if !m.s.kubernetes() {
		return
	}
	gen := m.s.TrafficGen
	if !m.trafficDirty {
		gen++
	}
	w := m.s.workload()
	for _, d := range found {
		served := m.s.canaryServed() && d.Hash == m.s.CanaryHash
		if d.Hash == "" || d.Hash == m.s.StableHash || served || hasDrain(m.s.Drains, d.Hash) {
			continue
		}
		d.Delay, d.Gen, d.Timer = max(w.ScaleDownDelay, w.AbortScaleDownDelay), gen, nil
		m.s.Drains = append(m.s.Drains, d)
	}
}

func hasDrain(drains []Drain, hash string) bool {
	for _, d := range drains {
		if d.Hash == hash {
			return true
		}
	}
	return false
}

// adoptStable makes r's version the stable one at 100 % without pushing
// anything: what follows in the same Step decides the traffic.
func (m *machine) adoptStable(commit string, r *api.Rollout) {
	m.s.Spec = r
	m.s.Commit = commit
	m.s.StableVersion = r.Version
	m.s.StableHash = specHash(r)
	m.s.StableSpec = r
	m.s.Weights = api.CanaryWeights(0)
	m.s.StepIndex = m.s.StepCount()
	m.s.Cursor = CursorDone
}

// resumeHeld puts the canary found in the cluster back at its step,
// held. The steps up to it are replayed for their traffic (header and
// mirror routes included), stopping before a step that would raise the
// canary above the weight found: the rollout holds at the last step whose
// traffic was in force, entered (its traffic pushed again; the clients
// have it already), or at the first step not entered yet. Nothing moves on
// until an operator says so.
func (m *machine) resumeHeld(e Recovered) {
	r := e.Canary
	m.s.Spec = r
	m.s.CanaryVersion = r.Version
	m.s.CanaryHash = specHash(r)
	m.s.BaselineHash = m.s.newBaselineHash()
	entered := m.replaySteps(min(e.Step, m.s.StepCount()-1), max(e.Weight, 0))
	m.s.StepIndex = max(entered, 0)
	m.s.Cursor = CursorEnter
	gen := m.pushTraffic()
	if entered >= 0 {
		m.s.AwaitGen, m.s.Cursor = gen, CursorAwaitAck
	} else {
		m.s.StepIndex = 0
	}
	if entered >= 0 && entered < m.s.StepCount()-1 && entered < e.Step {
		// A later step would have raised the weight: hold before it.
		m.s.StepIndex, m.s.Cursor, m.s.AwaitGen = entered+1, CursorEnter, 0
	}
	m.rescale = true
	reason := fmt.Sprintf("recovered from %s after a state loss: paused at step %d; promote or abort", sourceText(e.Source), m.s.StepIndex+1)
	m.s.Hold = &Hold{Kind: HoldRecovered, Reason: reason}
	m.alert(AlertStateRecovered, e.Commit, fmt.Sprintf("%s; found %s: canary %s at %d%% against stable %s", reason, e.Found, r.Version, m.s.Weights.Canary, m.s.StableVersion))
}

// resumeAborted puts back a canary whose set carries the abort mark: it
// stays aborted, at the step it was aborted at, and all traffic goes back
// to stable (pushed again: clients may still hold the canary's weight of
// before the abort). Its set drains as keepDraining says: its pods stay
// until that traffic is ACKed and a whole delay has passed. Retry or a new
// version lets it go on, as after any abort.
//
// A mark found with the canary's weight still on it is an abort that
// waited for stable pods (dynamicStableScale shrank the stable): as then,
// the canary keeps that weight until the stable's pods are Ready.
func (m *machine) resumeAborted(e Recovered) {
	r := e.Canary
	m.s.Spec = r
	m.s.CanaryVersion = r.Version
	m.s.CanaryHash = specHash(r)
	m.s.StepIndex = min(max(e.Step, 0), max(m.s.StepCount()-1, 0))
	m.s.Cursor = CursorEnter
	m.s.Aborted = true
	m.s.AbortReason = fmt.Sprintf("aborted before a state loss (recovered from %s)", sourceText(e.Source))
	m.rescale = true
	if e.Weight > 0 && m.s.workload().DynamicStableScale {
		m.s.Weights = api.CanaryWeights(min(e.Weight, 100))
		if m.await(WaitAbort, 0, m.s.Spec.Replicas, "") {
			m.pushTraffic() // what the clients hold, until the stable's pods are Ready
		} else {
			m.returnToStable()
		}
	} else {
		m.settleTraffic(SettleAbort, nil)
	}
	m.alert(AlertStateRecovered, e.Commit, fmt.Sprintf("recovered from %s after a state loss: found %s; canary %s had been aborted: it stays aborted and its traffic goes back to stable %s; retry or push a new version",
		sourceText(e.Source), e.Found, r.Version, m.s.StableVersion))
}

// replaySteps applies the traffic of steps 0..last in order and returns
// the index of the last one applied: -1 when the first already asks for
// more than weight.
func (m *machine) replaySteps(last, weight int32) int32 {
	entered := int32(-1)
	for i := int32(0); i <= last; i++ {
		weights, headers, mirrors := m.s.Weights, m.s.HeaderRoutes, m.s.MirrorRoutes
		m.applyStep(m.s.Spec.Steps[i])
		if m.s.Weights.Canary > weight {
			m.s.Weights, m.s.HeaderRoutes, m.s.MirrorRoutes = weights, headers, mirrors
			break
		}
		entered = i
	}
	return entered
}

// sourceText names a recovery source in messages.
func sourceText(s RecoverySource) string {
	if s == RecoveredFromGit {
		return "git's history"
	}
	return "the cluster"
}
