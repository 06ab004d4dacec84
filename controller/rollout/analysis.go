package rollout

import (
	"fmt"
)

// analysisResult records progress of a run and acts on its verdict:
// Successful completes an analysis step, Inconclusive holds the canary
// (promote skips, retry or resume re-runs), Failed and Error abort it.
// Results for runs that are unknown, stopped or already finished are
// ignored, so a late or repeated report never acts twice.
func (m *machine) analysisResult(e AnalysisResult) {
	if m.s.Removed {
		return
	}
	r := m.s.run(e.Run)
	if r == nil || r.Phase.Terminal() {
		return
	}
	phase := e.Phase
	if phase == "" {
		phase = AnalysisRunning
	}
	r.Phase = phase
	r.Message = e.Message
	if e.Metrics != nil {
		r.Metrics = cloneSlice(e.Metrics)
	}
	if !phase.Terminal() {
		return
	}
	name, kind := r.Name, r.Kind
	m.trimRuns()
	active := m.s.CanaryActive() && (name == m.s.StepRun || name == m.s.BackgroundRun || m.s.experimentRun(name))
	if !active {
		return
	}
	reason := fmt.Sprintf("analysis %s %s", name, phaseVerb(phase))
	if e.Message != "" {
		reason += ": " + e.Message
	}
	switch phase {
	case AnalysisSuccessful:
		if kind == RunStep && m.s.Cursor == CursorRunning {
			m.s.Cursor = CursorDone
			m.advance()
		}
		if kind == RunExperiment {
			m.experimentProgress()
		}
	case AnalysisInconclusive:
		m.s.Hold = &Hold{Kind: HoldInconclusive, Reason: reason, Run: name}
		m.alert(AlertRolloutPaused, m.s.Commit, reason, name)
	case AnalysisFailed:
		a := m.alert(AlertAnalysisFailed, m.s.Commit, reason, name)
		m.setLastMetric(a, e)
		m.abort(reason)
	case AnalysisError:
		a := m.alert(AlertAnalysisError, m.s.Commit, reason, name)
		m.setLastMetric(a, e)
		m.abort(reason)
	}
}

// setLastMetric adds the deciding metric to the alert just queued.
func (m *machine) setLastMetric(a Alert, e AnalysisResult) {
	a.Metric, a.Value, a.Condition = e.Metric, e.Value, e.Condition
	m.acts[len(m.acts)-1] = Notify{Alert: a}
}

func phaseVerb(p AnalysisPhase) string {
	switch p {
	case AnalysisSuccessful:
		return "succeeded"
	case AnalysisFailed:
		return "failed"
	case AnalysisInconclusive:
		return "was inconclusive"
	case AnalysisError:
		return "errored"
	}
	return string(p)
}
