package rollout

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/sluice-dev/sluice/api"
)

// change applies a new version of the rollout's strategy.
func (m *machine) change(c Change) {
	if c.Class == ClassRemoved || c.Rollout == nil {
		m.remove(c.Commit)
		return
	}
	if m.s.Key == (api.Key{}) {
		m.s.Key = c.Rollout.Key
	}
	if m.s.Removed && m.s.CanaryVersion != "" && !m.s.Aborted {
		// Managed again: the stopped step and background run start over.
		m.s.Cursor = CursorEnter
		m.s.BackgroundRun = ""
	}
	m.s.Removed = false
	m.s.Errors = nil
	m.s.ErrorCommit = ""
	if m.s.Spec == nil || m.s.StableVersion == "" {
		m.first(c.Commit, c.Rollout)
		return
	}
	// A rollout queued or pending keeps its place in the canary queue.
	ticket := c.Ticket
	if m.s.Pending != nil {
		ticket = earlier(ticket, m.s.Pending.Ticket)
	}
	if len(c.Risky) > 0 {
		// A risky change never takes a slot: it leaves the queue until
		// approved, and then queues again with the same ticket.
		if q := m.s.Queued; q != nil {
			ticket = earlier(ticket, q.Ticket)
			m.s.Queued = nil
		}
		// Nor does it wait for its wave until approved (waves.go).
		m.s.WaveWait = nil
		m.s.Pending = &Pending{Commit: c.Commit, Class: c.Class, Rollout: c.Rollout, Reasons: c.Risky, ResumeStep: c.ResumeStep, Ticket: ticket}
		m.alert(AlertRolloutPaused, c.Commit, "waiting for approval: "+strings.Join(c.Risky, "; "), "approval")
		return
	}
	// A newer change that needs no approval supersedes a pending one.
	m.s.Pending = nil
	m.apply(c.Commit, c.Rollout, c.ResumeStep, ticket)
}

// first makes the first version ever seen stable at 100 %.
func (m *machine) first(commit string, r *api.Rollout) {
	m.adoptStable(commit, r)
	m.s.CanaryVersion = ""
	m.s.BaselineHash = ""
	if m.s.kubernetes() {
		// The first traffic waits for the first version's pods.
		m.clearWait()
		if m.await(WaitFirst, 0, r.Replicas, "") {
			return
		}
	}
	m.settleTraffic(SettleStable, nil)
}

// apply puts an accepted (approved or not risky) change in force. The
// versions decide what it is: the version in flight (or stable, with no
// canary) means an edit; the stable version while a canary is in flight
// means a rollback; anything else starts a new canary.
// In Kubernetes mode a version is its image and its pod-template hash: the
// same image with another template is a new canary, as in Argo Rollouts.
// A new version while the first one still waits for its pods replaces it.
// A new canary that needs a slot it does not have queues (queue.go); any
// other outcome drops a queued canary, which this change supersedes.
func (m *machine) apply(commit string, r *api.Rollout, resume *int32, ticket uint64) {
	queued := m.s.Queued
	m.s.Queued = nil
	m.s.WaveWait = nil
	m.s.WaveCancelled = nil
	current, currentHash := m.s.StableVersion, m.s.StableHash
	if m.s.CanaryVersion != "" {
		current, currentHash = m.s.CanaryVersion, m.s.CanaryHash
	}
	hash := specHash(r)
	switch {
	case r.Version == current && hash == currentHash:
		m.edit(commit, r, resume)
	case r.Version == m.s.StableVersion && hash == m.s.StableHash:
		m.rollback(commit, r)
	case m.s.Wait != nil && m.s.Wait.Kind == WaitFirst:
		m.first(commit, r)
	case waitsForWave(r):
		m.parkForWave(commit, r, ticket)
	case m.needsSlot(ticket):
		m.queue(commit, r, ticket, queued)
	default:
		m.newCanary(commit, r)
	}
}

// edit takes a same-version change: the canary continues from its current
// step, or from resume when the diff engine mapped it into the new steps
// (clamped to the new step count); the current step starts over only when
// it changed. Traffic is pushed again if endpoints or host changed.
func (m *machine) edit(commit string, r *api.Rollout, resume *int32) {
	old := m.s.Spec
	oldTraffic := m.s.Traffic()
	m.s.Spec = r
	m.s.Commit = commit
	if m.s.CanaryVersion == "" {
		m.s.StableSpec = r // the stable's own rollout, edited
	}
	if !m.s.CanaryActive() {
		if n := m.s.StepCount(); m.s.CanaryVersion == "" || m.s.StepIndex > n {
			m.s.StepIndex = n
		}
		if w := m.s.Wait; w != nil && (w.Kind == WaitFirst || w.Kind == WaitAbort) {
			// Traffic still waits for stable pods, as many as the edited
			// spec asks for; it moves (with any new host) once they are Ready.
			m.continueWait()
			return
		}
		if !reflect.DeepEqual(oldTraffic, m.s.Traffic()) {
			m.settleTraffic(SettleStable, nil)
		}
		return
	}
	if !reflect.DeepEqual(old.Background, r.Background) {
		m.stopRun(m.s.BackgroundRun)
		m.s.BackgroundRun = ""
		if m.s.Hold != nil && m.s.Hold.Kind == HoldInconclusive && m.s.Hold.Run != m.s.StepRun {
			m.s.Hold = nil
		}
	}
	from, idx := m.s.StepIndex, m.s.StepIndex
	if resume != nil && *resume >= 0 {
		idx = *resume
	}
	if n := m.s.StepCount(); idx > n || m.s.WaveHeld {
		// A part holding for later waves has done its steps: an edit
		// leaves it holding (waves.go).
		idx = n
	}
	m.s.StepIndex = idx
	if !sameStep(old.Steps, from, r.Steps, idx) {
		m.stopStepWork()
		m.s.Cursor = CursorEnter
	}
	if !reflect.DeepEqual(oldTraffic, m.s.Traffic()) {
		m.pushTraffic()
	}
	m.advance()
}

// sameStep reports whether step i of a and step j of b are the same step
// (both past the end counts as the same).
func sameStep(a []api.Step, i int32, b []api.Step, j int32) bool {
	if int(i) >= len(a) || int(j) >= len(b) {
		return int(i) >= len(a) && int(j) >= len(b)
	}
	return reflect.DeepEqual(a[i], b[j])
}

// rollback drops the canary because the stable version was pushed again:
// all traffic to stable, no steps, Healthy.
func (m *machine) rollback(commit string, r *api.Rollout) {
	served := m.s.canaryServed()
	m.stopAll()
	m.clearWait()
	m.s.BackgroundRun = ""
	canaryVersion, canaryHash, canarySpec := m.s.CanaryVersion, m.s.CanaryHash, m.s.Spec
	baseline := m.s.runningBaseline()
	m.s.Spec = r
	m.s.StableSpec = r
	m.s.Commit = commit
	m.s.CanaryVersion = ""
	m.s.CanaryHash = ""
	m.s.BaselineHash = ""
	m.s.Aborted = false
	m.s.AbortReason = ""
	m.s.Attempt = 0
	m.s.WaveCancelled = nil
	m.clearWave()
	m.s.Weights = api.CanaryWeights(0)
	m.s.HeaderRoutes = nil
	m.s.MirrorRoutes = nil
	m.s.StepIndex = m.s.StepCount()
	m.s.Cursor = CursorDone
	m.settleTraffic(SettleStable, nil)
	if served {
		m.drain(canaryVersion, canaryHash, canarySpec, m.s.workload().AbortScaleDownDelay)
	}
	m.drainBaseline(baseline, m.s.workload().AbortScaleDownDelay)
}

// newCanary starts the steps from the first for r's version; a canary in
// flight is dropped (its runs stopped, its routes removed) and stable stays.
func (m *machine) newCanary(commit string, r *api.Rollout) {
	replaced := ""
	if m.s.CanaryActive() {
		replaced = m.s.CanaryVersion
	}
	served := m.s.canaryServed()
	oldVersion, oldHash, oldSpec := m.s.CanaryVersion, m.s.CanaryHash, m.s.Spec
	baseline := m.s.runningBaseline()
	m.stopAll()
	m.clearWait() // an abort waiting for stable pods: its traffic moves now
	m.s.Spec = r
	m.s.Commit = commit
	m.s.Runs = nil
	m.s.StepRun = ""
	m.s.BackgroundRun = ""
	m.s.CanaryVersion = r.Version
	m.s.CanaryHash = specHash(r)
	m.s.BaselineHash = m.s.newBaselineHash()
	m.s.Aborted = false
	m.s.AbortReason = ""
	m.s.Attempt = 0
	m.s.Weights = api.CanaryWeights(0)
	m.s.HeaderRoutes = nil
	m.s.MirrorRoutes = nil
	m.s.StepIndex = 0
	m.s.Cursor = CursorEnter
	m.s.WaveCancelled = nil
	m.clearWave()
	m.pushTraffic()
	if served && oldHash != m.s.CanaryHash {
		m.drain(oldVersion, oldHash, oldSpec, m.s.workload().ScaleDownDelay)
	}
	m.drainBaseline(baseline, m.s.workload().ScaleDownDelay)
	reason := fmt.Sprintf("canary %s against stable %s", r.Version, m.s.StableVersion)
	if r.Version == m.s.StableVersion {
		reason = fmt.Sprintf("canary %s (pod template %s) against stable %s (pod template %s)", r.Version, m.s.CanaryHash, m.s.StableVersion, m.s.StableHash)
	}
	if replaced != "" {
		reason += fmt.Sprintf(" (replaces canary %s)", replaced)
	}
	m.alert(AlertRolloutStarted, commit, reason)
	m.advance()
}

// remove stops managing the rollout and leaves its last traffic in place.
func (m *machine) remove(commit string) {
	if m.s.Spec == nil || m.s.Removed {
		return
	}
	m.stopAll()
	m.s.Pending = nil
	m.s.Queued = nil
	m.s.WaveWait = nil
	m.clearWave()
	m.s.Removed = true
	if commit == "" {
		commit = m.s.Commit
	}
	m.alert(AlertRolloutUnmanaged, commit, fmt.Sprintf(
		"rollout file removed: sluice stops managing it and leaves its traffic as it was (stable %s %d%%, canary %s %d%%)",
		m.s.StableVersion, m.s.Weights.Stable, m.s.CanaryVersion, m.s.Weights.Canary))
}
