package rollout

import (
	"fmt"

	"github.com/sluice-dev/sluice/api"
)

// This file holds traffic back until the pods that will take it are Ready
// (Kubernetes mode): scale up, wait for Ready pods, then push the weight.
// A progress deadline bounds each wait; Ready pods growing re-arm it.

// WaitKind says what a wait for Ready pods holds back.
type WaitKind string

// Wait kinds.
const (
	// WaitStep: a canary step's traffic (or its setCanaryScale) waits for
	// the canary's pods and, with dynamicStableScale, the stable's.
	WaitStep WaitKind = "step"
	// WaitPromotion: the canary runs the rollout's full replicas before it
	// takes 100 %.
	WaitPromotion WaitKind = "promotion"
	// WaitFirst: the first version's pods before its first traffic.
	WaitFirst WaitKind = "first"
	// WaitAbort: an abort's traffic goes back to stable once stable has
	// its full replicas Ready again (dynamicStableScale shrank it, or pods
	// were lost).
	WaitAbort WaitKind = "abort"
)

// PodWait is a wait for Ready pods that holds traffic back. It lives
// beside State.Timer, not in it: a step waits for pods before its traffic
// moves and runs its pause only after the ACK, so the two never run at
// once, but keeping them apart means neither can cancel the other.
type PodWait struct {
	Kind WaitKind `json:"kind"`
	// Canary, Stable and Baseline are the Ready pods each side needs (0:
	// none).
	Canary   int32 `json:"canary,omitempty"`
	Stable   int32 `json:"stable,omitempty"`
	Baseline int32 `json:"baseline,omitempty"`
	// Progress counts the needed pods that were Ready when the deadline
	// was last armed: more Ready pods than that re-arm it.
	Progress int32 `json:"progress,omitempty"`
	// Timer is the progress deadline; nil once it fired.
	Timer *Timer `json:"timer,omitempty"`
	// Exceeded is why the deadline passed, once it has.
	Exceeded string `json:"exceeded,omitempty"`
	// Reason is why a promotion happens ("promoted fully by operator").
	Reason string `json:"reason,omitempty"`
}

// waitNeeds lists the sides a wait needs: canary, baseline, stable.
func (s State) waitNeeds() []WorkloadStatus {
	w := s.Wait
	if w == nil {
		return nil
	}
	var out []WorkloadStatus
	if w.Canary > 0 {
		out = append(out, WorkloadStatus{Role: RoleCanary, Hash: s.CanaryHash, Desired: w.Canary, Ready: s.pods(s.CanaryHash).Ready})
	}
	if h, ok := s.baseline(); ok && w.Baseline > 0 {
		out = append(out, WorkloadStatus{Role: RoleBaseline, Hash: h, Desired: w.Baseline, Ready: s.pods(h).Ready})
	}
	if w.Stable > 0 {
		out = append(out, WorkloadStatus{Role: RoleStable, Hash: s.StableHash, Desired: w.Stable, Ready: s.pods(s.StableHash).Ready})
	}
	return out
}

// waitShort is the first side the wait still lacks Ready pods for.
func (s State) waitShort() (WorkloadStatus, bool) {
	for _, n := range s.waitNeeds() {
		if n.Ready < n.Desired {
			return n, true
		}
	}
	return WorkloadStatus{}, false
}

// waitProgress counts the needed pods that are Ready.
func (s State) waitProgress() int32 {
	var p int32
	for _, n := range s.waitNeeds() {
		p += min(n.Ready, n.Desired)
	}
	return p
}

// waitMessage is "waiting for canary pods: 1/2 ready", with the deadline's
// verdict once it passed.
func (s State) waitMessage() string {
	n, ok := s.waitShort()
	if !ok {
		return ""
	}
	msg := fmt.Sprintf("waiting for %s pods: %d/%d ready", n.Role, n.Ready, n.Desired)
	if s.Wait.Exceeded != "" {
		msg += " (progress deadline exceeded)"
	}
	return msg
}

// progressDeadline is Workload.ProgressDeadline or Argo's default.
func (s State) progressDeadline() Timer {
	d := s.workload().ProgressDeadline
	if d <= 0 {
		d = api.DefaultProgressDeadline
	}
	return Timer{ID: fmt.Sprintf("deadline/%d/%d", s.StepIndex, s.Seq+1), Duration: d}
}

// await starts or continues a wait of kind for canary and stable Ready
// pods, and reports whether traffic must still wait. A new wait arms the
// progress deadline; more Ready pods re-arm it.
func (m *machine) await(kind WaitKind, canary, stable int32, reason string) bool {
	return m.awaitWith(PodWait{Kind: kind, Canary: canary, Stable: stable, Reason: reason})
}

// awaitWith is await for a wait that may also need baseline pods.
func (m *machine) awaitWith(w PodWait) bool {
	kind := w.Kind
	prev := m.s.Wait
	fresh := prev == nil || prev.Kind != kind
	if fresh {
		m.clearWait()
	} else {
		w.Progress, w.Timer, w.Exceeded = prev.Progress, prev.Timer, prev.Exceeded
		if w.Reason == "" {
			w.Reason = prev.Reason
		}
	}
	m.s.Wait = &w
	if _, short := m.s.waitShort(); !short {
		m.clearWait()
		return false
	}
	if kind == WaitStep || kind == WaitPromotion {
		m.s.Cursor = CursorAwaitPods
	}
	progress := m.s.waitProgress()
	if fresh || progress > w.Progress || w.Timer == nil && w.Exceeded == "" {
		m.armDeadline(progress)
	}
	return true
}

// armDeadline (re-)arms the wait's progress deadline.
func (m *machine) armDeadline(progress int32) {
	w := *m.s.Wait
	if w.Timer != nil {
		m.emit(CancelTimer{ID: w.Timer.ID})
	}
	t := m.s.progressDeadline()
	w.Timer, w.Progress, w.Exceeded = &t, progress, ""
	m.s.Wait = &w
	m.emit(StartTimer{Timer: t})
}

// clearWait ends the wait and disarms its deadline.
func (m *machine) clearWait() {
	if w := m.s.Wait; w != nil && w.Timer != nil {
		m.emit(CancelTimer{ID: w.Timer.ID})
	}
	m.s.Wait = nil
}

// stepWaits reports whether entering st must wait for pods: when it raises
// the canary's share or sets its scale, the canary needs the pods of its
// new size, and so does the baseline when there is one (it is the
// canary's size and gets the canary's share); when it raises the
// stable's share (dynamicStableScale shrank it, or it lost pods), the
// stable needs the pods of its new weight.
func (m *machine) stepWaits(st api.Step) bool {
	if !m.s.kubernetes() {
		return false
	}
	target, now := m.s.Weights, m.s.Weights
	if st.Kind == api.StepSetWeight {
		target = api.CanaryWeights(min(max(st.Weight, 0), 100))
	}
	_, baseline := m.s.baseline()
	if baseline {
		target, now = target.WithBaseline(), now.WithBaseline()
	}
	w := PodWait{Kind: WaitStep}
	if target.Canary > now.Canary || st.CanaryScale != nil {
		w.Canary = max(m.s.canaryCount(target.Canary, m.s.StepIndex), m.s.replicasFor(target.Canary))
		if baseline {
			w.Baseline = w.Canary
		}
	}
	if target.Stable > now.Stable {
		// Without dynamicStableScale stable runs its full replicas and
		// this only waits when it lost pods.
		w.Stable = m.s.replicasFor(target.Stable)
	}
	return m.awaitWith(w)
}

// promotionWaits reports whether a promotion must wait for the canary to
// run the rollout's full replicas.
func (m *machine) promotionWaits(reason string) bool {
	return m.s.kubernetes() && m.await(WaitPromotion, m.s.Spec.Replicas, 0, reason)
}

// continueWait lets a wait go on after a PodsReady.
func (m *machine) continueWait() {
	w := m.s.Wait
	if w == nil {
		return
	}
	switch w.Kind {
	case WaitFirst:
		if !m.await(WaitFirst, 0, m.s.Spec.Replicas, "") {
			m.settleTraffic(SettleStable, nil)
		}
	case WaitAbort:
		if !m.await(WaitAbort, 0, m.s.Spec.Replicas, "") {
			m.returnToStable()
		}
	default:
		if h := m.s.Hold; h != nil && h.Kind == HoldProgressDeadline {
			if _, short := m.s.waitShort(); !short {
				m.s.Hold = nil // the pods it waited for are there
			}
		}
		m.advance()
	}
}

// deadlineFired acts on the progress deadline of the wait, and reports
// whether id was that deadline. A canary that did not get its pods aborts
// (progressDeadlineAbort) or is held; a stable wait (the first version, an
// abort) has nothing safer to fall back to, so it says so and keeps
// waiting.
func (m *machine) deadlineFired(id string) bool {
	w := m.s.Wait
	if w == nil || w.Timer == nil || w.Timer.ID != id {
		return false
	}
	n, _ := m.s.waitShort()
	c := *w
	c.Timer = nil
	c.Exceeded = fmt.Sprintf("progress deadline exceeded: %s pods %d/%d ready after %s", n.Role, n.Ready, n.Desired, w.Timer.Duration)
	m.s.Wait = &c
	if (w.Kind != WaitStep && w.Kind != WaitPromotion) || !m.s.CanaryActive() {
		return true
	}
	if m.s.workload().ProgressDeadlineAbort {
		m.abort(c.Exceeded)
		return true
	}
	m.s.Hold = &Hold{Kind: HoldProgressDeadline, Reason: c.Exceeded}
	m.alert(AlertRolloutPaused, m.s.Commit, c.Exceeded, m.stepDetail(), "deadline", fmt.Sprintf("s%d", m.s.Seq+1))
	return true
}

// releaseDeadline lets a canary held by its progress deadline wait again,
// with a fresh deadline (resume, retry).
func (m *machine) releaseDeadline() {
	m.s.Hold = nil
	if w := m.s.Wait; w != nil {
		c := *w
		c.Exceeded = ""
		m.s.Wait = &c
	}
}
