package rollout

import (
	"fmt"
	"reflect"

	"github.com/sluice-dev/sluice/api"
)

// maxAdvance bounds one advance; a canary has far fewer steps per Step.
const maxAdvance = 10_000

// held reports whether the canary must stay at its current step.
func (m *machine) held() bool {
	return m.s.UserPaused || m.s.Hold != nil || m.s.Pending != nil
}

// currentStep is the step at StepIndex, if there is one.
func (m *machine) currentStep() (api.Step, bool) {
	steps := m.s.Steps()
	if m.s.StepIndex < 0 || int(m.s.StepIndex) >= len(steps) {
		return api.Step{}, false
	}
	return steps[m.s.StepIndex], true
}

// advance moves the canary as far as it can go without an outside event:
// enter the current step, wait for its ACK, run its window, and once it is
// done go on to the next; after the last step, promote.
func (m *machine) advance() {
	for range maxAdvance {
		if !m.s.CanaryActive() || m.held() {
			return
		}
		st, ok := m.currentStep()
		if !ok {
			reason := "all steps completed"
			if w := m.s.Wait; w != nil && w.Reason != "" {
				reason = w.Reason
			}
			if m.promotionWaits(reason) || m.holdsForLaterWaves() {
				return
			}
			m.promote(reason)
			return
		}
		if m.s.Cursor != CursorEnter && m.s.Cursor != CursorAwaitPods && m.s.Cursor != CursorAwaitAck {
			// The step's traffic is in place: background analysis may start.
			m.startBackground()
		}
		switch m.s.Cursor {
		case CursorEnter, CursorAwaitPods:
			if m.stepWaits(st) {
				return
			}
			if m.applyStep(st) {
				m.s.AwaitGen = m.pushTraffic()
				m.s.Cursor = CursorAwaitAck
				return
			}
			m.s.Cursor = CursorReady
		case CursorAwaitAck, CursorRunning:
			return
		case CursorReady:
			m.startWindow(st)
			if m.s.Cursor == CursorRunning {
				return
			}
		case CursorDone:
			m.alert(AlertStepCompleted, m.s.Commit, fmt.Sprintf("step %d/%d: %s", m.s.StepIndex+1, m.s.StepCount(), st), m.stepDetail())
			m.s.StepIndex++
			m.s.Cursor = CursorEnter
		default:
			m.s.Cursor = CursorEnter // unknown (corrupt) cursor: enter again
		}
	}
}

// applyStep applies the traffic effect of entering st and reports whether
// the traffic changed. A step may combine a weight with a header route and
// a mirror route (api.Step); all of them change together, so the step
// waits for one ACK. pause, analysis and setCanaryScale change no traffic.
func (m *machine) applyStep(st api.Step) bool {
	changed := false
	if st.Kind == api.StepSetWeight {
		if w := api.CanaryWeights(min(max(st.Weight, 0), 100)); m.s.Weights != w {
			m.s.Weights = w
			changed = true
		}
	}
	if st.HeaderRoute != nil {
		routes := upsert(m.s.HeaderRoutes, *st.HeaderRoute, func(r api.HeaderRoute) string { return r.Name }, len(st.HeaderRoute.Match) == 0)
		if !reflect.DeepEqual(routes, m.s.HeaderRoutes) {
			m.s.HeaderRoutes = routes
			changed = true
		}
	}
	if st.MirrorRoute != nil {
		routes := upsert(m.s.MirrorRoutes, *st.MirrorRoute, func(r api.MirrorRoute) string { return r.Name }, len(st.MirrorRoute.Match) == 0)
		if !reflect.DeepEqual(routes, m.s.MirrorRoutes) {
			m.s.MirrorRoutes = routes
			changed = true
		}
	}
	return changed
}

// upsert returns a copy of list with v replacing the element of the same
// name (or appended), or with that element removed.
func upsert[T any](list []T, v T, name func(T) string, remove bool) []T {
	var out []T
	found := false
	for _, e := range list {
		if name(e) != name(v) {
			out = append(out, e)
			continue
		}
		found = true
		if !remove {
			out = append(out, v)
		}
	}
	if !found && !remove {
		out = append(out, v)
	}
	return out
}

// startWindow starts what st waits for once its traffic is in place, or
// marks it done when it waits for nothing.
func (m *machine) startWindow(st api.Step) {
	switch st.Kind {
	case api.StepPause:
		m.s.Cursor = CursorRunning
		if st.Pause.Indefinite() {
			m.alert(AlertRolloutPaused, m.s.Commit, fmt.Sprintf("step %d/%d: pause until promoted", m.s.StepIndex+1, m.s.StepCount()), m.stepDetail())
			return
		}
		t := Timer{ID: fmt.Sprintf("pause/%d/%d", m.s.StepIndex, m.s.Seq+1), Duration: st.Pause.Duration}
		m.s.Timer = &t
		m.emit(StartTimer{Timer: t})
	case api.StepAnalysis:
		if st.Analysis == nil {
			m.s.Cursor = CursorDone
			return
		}
		m.s.StepRun = m.startRun(RunStep, *st.Analysis)
		m.s.Cursor = CursorRunning
	case api.StepExperiment:
		m.startExperiment(st.Experiment)
	default:
		m.s.Cursor = CursorDone
	}
}

// startBackground starts the background analysis once the canary reaches
// its starting step; a run that finished is never started again.
func (m *machine) startBackground() {
	bg := m.s.Spec.Background
	if bg == nil || m.s.BackgroundRun != "" || m.s.StepIndex < bg.StartingStep {
		return
	}
	m.s.BackgroundRun = m.startRun(RunBackground, bg.Analysis)
}

// startRun records a new run and emits its StartAnalysis.
func (m *machine) startRun(kind RunKind, a api.Analysis) string {
	m.s.RunSeq++
	name := fmt.Sprintf("%s-%d", a.TemplateNames(), m.s.RunSeq)
	args := map[string]string{
		api.ArgCanary:    m.s.CanaryVersion,
		api.ArgStable:    m.s.StableVersion,
		api.ArgRollout:   m.s.Key.Parent().Name,
		api.ArgNamespace: m.s.Key.Namespace,
	}
	if seat := m.s.Spec.Wave; seat != nil {
		args[api.ArgCluster] = seat.Cluster
	}
	m.hashArgs(args)
	m.s.Runs = append(m.s.Runs, Run{Name: name, Kind: kind, Step: m.s.StepIndex, Phase: AnalysisPending, Analysis: a, Args: args})
	m.trimRuns()
	m.emit(StartAnalysis{Rollout: m.s.Key, Run: name, Kind: kind, Analysis: a, Args: args})
	return name
}

// trimRuns drops the oldest finished runs beyond maxFinishedRuns.
func (m *machine) trimRuns() {
	finished := 0
	for _, r := range m.s.Runs {
		if r.Phase.Terminal() {
			finished++
		}
	}
	if finished <= maxFinishedRuns {
		return
	}
	drop := finished - maxFinishedRuns
	out := m.s.Runs[:0:0]
	for _, r := range m.s.Runs {
		if drop > 0 && r.Phase.Terminal() {
			drop--
			continue
		}
		out = append(out, r)
	}
	m.s.Runs = out
}

// stopRun stops a run that has not finished; it ends Successful with the
// message "run terminated", as Argo marks terminated runs.
func (m *machine) stopRun(name string) {
	r := m.s.run(name)
	if r == nil || r.Phase.Terminal() {
		return
	}
	r.Phase = AnalysisSuccessful
	r.Message = "run terminated"
	m.emit(StopAnalysis{Run: name})
	m.trimRuns()
}

// stopStepWork cancels the current step's timer, run and wait for pods.
func (m *machine) stopStepWork() {
	if w := m.s.Wait; w != nil && (w.Kind == WaitStep || w.Kind == WaitPromotion) {
		m.clearWait()
	}
	if m.s.Timer != nil {
		m.emit(CancelTimer{ID: m.s.Timer.ID})
		m.s.Timer = nil
	}
	m.stopRun(m.s.StepRun)
	m.s.StepRun = ""
	m.stopExperiment()
	if m.s.Hold != nil && m.s.Hold.Kind == HoldInconclusive {
		m.s.Hold = nil
	}
}

// stopAll stops everything the canary runs.
func (m *machine) stopAll() {
	m.stopStepWork()
	m.stopRun(m.s.BackgroundRun)
	m.s.Hold = nil
	m.s.UserPaused = false
}

// promote makes the canary the stable version at 100 % and removes its
// routes. The rollout is Healthy, and rollout-completed sent, only once
// the clients ACK those routes.
func (m *machine) promote(reason string) {
	m.stopAll()
	m.clearWave()
	m.s.BackgroundRun = ""
	oldVersion, oldHash, oldSpec := m.s.StableVersion, m.s.StableHash, m.s.StableSpec
	baseline := m.s.runningBaseline()
	m.s.StableVersion = m.s.CanaryVersion
	m.s.StableHash = m.s.CanaryHash
	m.s.StableSpec = m.s.Spec
	m.s.CanaryVersion = ""
	m.s.CanaryHash = ""
	m.s.BaselineHash = ""
	m.s.Weights = api.CanaryWeights(0)
	m.s.HeaderRoutes = nil
	m.s.MirrorRoutes = nil
	m.s.StepIndex = m.s.StepCount()
	m.s.Cursor = CursorDone
	done := m.newAlert(AlertRolloutCompleted, m.s.Commit, fmt.Sprintf("%s promoted to stable: %s", m.s.StableVersion, reason), attemptDetail(m.s.Attempt)...)
	m.settleTraffic(SettlePromotion, &done)
	if oldHash != m.s.StableHash {
		m.drain(oldVersion, oldHash, oldSpec, m.s.workload().ScaleDownDelay)
	}
	m.drainBaseline(baseline, m.s.workload().ScaleDownDelay)
}

// promoteFull promotes at once (sluice promote --full); in Kubernetes mode
// through the safe order: the canary at full size and Ready first.
func (m *machine) promoteFull() {
	const reason = "promoted fully by operator"
	if !m.s.kubernetes() {
		m.promote(reason)
		return
	}
	m.stopAll()
	m.s.StepIndex = m.s.StepCount()
	m.s.Cursor = CursorEnter
	if m.promotionWaits(reason) {
		return
	}
	m.promote(reason)
}

// abort sends all traffic back to stable and holds the canary there until
// a new version or retry. The alert goes at once; the phase turns Degraded
// once the clients ACK the routes back to stable. In Kubernetes mode a
// stable without its full replicas Ready (dynamicStableScale shrank it)
// scales up first, and the traffic moves once they are Ready.
func (m *machine) abort(reason string) {
	m.stopAll()
	m.clearWave()
	m.s.Aborted = true
	m.s.AbortReason = reason
	m.s.Cursor = CursorEnter
	if !m.s.kubernetes() || !m.await(WaitAbort, 0, m.s.Spec.Replicas, "") {
		m.returnToStable()
	}
	m.alert(AlertRolloutAborted, m.s.Commit, reason, m.stepDetail())
}

// returnToStable moves an aborted canary's traffic back to stable; its
// pods drain after the ACK and abortScaleDownDelay.
func (m *machine) returnToStable() {
	baseline := m.s.runningBaseline()
	m.s.Weights = api.CanaryWeights(0)
	m.s.HeaderRoutes = nil
	m.s.MirrorRoutes = nil
	m.settleTraffic(SettleAbort, nil)
	m.drain(m.s.CanaryVersion, m.s.CanaryHash, m.s.Spec, m.s.workload().AbortScaleDownDelay)
	m.drainBaseline(baseline, m.s.workload().AbortScaleDownDelay)
}

func attemptDetail(attempt int) []string {
	if attempt == 0 {
		return nil
	}
	return []string{fmt.Sprintf("r%d", attempt)}
}
