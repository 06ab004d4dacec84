package rollout

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/sluice-dev/sluice/api"
)

// Step is the one entry point of the machine: it applies ev to state and
// returns the next state and the actions to carry out, in order. It is
// deterministic and does no I/O. The returned state's Seq is one more than
// state's when anything changed or any action is due (so the caller
// persists before acting); an ignored event returns state unchanged and no
// actions.
func Step(state State, ev Event) (State, []Action) {
	m := &machine{s: state.clone()}
	switch e := ev.(type) {
	case Change:
		m.change(e)
	case Invalid:
		m.invalid(e)
	case TimerFired:
		m.timerFired(e)
	case AnalysisResult:
		m.analysisResult(e)
	case TrafficAcked:
		m.acked(e)
	case TrafficNacked:
		m.nacked(e)
	case TrafficAckTimeout:
		m.ackTimeout(e)
	case Command:
		m.command(e)
	case Restart:
		m.restart()
	case PodsReady:
		m.podsReady(e)
	case SlotGranted:
		m.slotGranted()
	case Recovered:
		m.recovered(e)
	case WaveOpen:
		m.waveOpened()
	case WaveRelease:
		m.waveReleased()
	case WaveFailed:
		m.waveFailed(e)
	case ClusterReachability:
		m.clusterReachability(e)
	}
	m.flushTraffic()
	m.flushWorkloads(m.rescale)
	m.summarize()
	m.s.Seq = state.Seq
	if len(m.acts) == 0 && reflect.DeepEqual(state, m.s) {
		return state, nil
	}
	m.s.Seq++
	return m.s, m.acts
}

// machine is one Step in progress: the state being changed and the
// actions queued so far.
type machine struct {
	s    State
	acts []Action
	// trafficDirty is set when the traffic changed; one SetTraffic with
	// the final traffic is emitted at the end of the Step.
	trafficDirty bool
	// rescale re-emits ScaleWorkloads even if the sets did not change.
	rescale bool
}

func (m *machine) emit(a Action) { m.acts = append(m.acts, a) }

// pushTraffic marks the traffic as changed and returns the generation the
// SetTraffic emitted at the end of this Step will carry.
func (m *machine) pushTraffic() uint64 {
	if !m.trafficDirty {
		m.trafficDirty = true
		m.s.TrafficGen++
	}
	return m.s.TrafficGen
}

// flushTraffic emits the single SetTraffic of this Step first, so the
// caller changes traffic before it starts or stops anything else.
func (m *machine) flushTraffic() {
	if !m.trafficDirty {
		return
	}
	set := SetTraffic{Gen: m.s.TrafficGen, Traffic: m.s.Traffic()}
	m.acts = append([]Action{set}, m.acts...)
	if m.s.kubernetes() {
		m.sharePushed(set.Traffic)
	}
}

// alert queues an alert about the current state. detail makes the id
// unique where an event can repeat within one commit.
func (m *machine) alert(ev AlertEvent, commit, reason string, detail ...string) Alert {
	a := m.newAlert(ev, commit, reason, detail...)
	m.emit(Notify{Alert: a})
	return a
}

// newAlert builds an alert about the current state without sending it.
func (m *machine) newAlert(ev AlertEvent, commit, reason string, detail ...string) Alert {
	version := m.s.CanaryVersion
	if version == "" {
		version = m.s.StableVersion
	}
	a := Alert{
		ID:       alertID(m.s.Key, commit, ev, detail...),
		Event:    ev,
		Severity: SeverityOf(ev),
		Rollout:  m.s.Key.String(),
		Version:  version,
		Commit:   commit,
		Reason:   reason,
		Weights:  m.s.routedWeights(),
	}
	return a
}

// alertID builds "ns/name/<commit7>/<event>[/<detail>...]"; the event
// loses its "rollout-" prefix, as in DESIGN §7's "default/checkout/9f8d111/aborted".
func alertID(k api.Key, commit string, ev AlertEvent, detail ...string) string {
	if len(commit) > shortCommit {
		commit = commit[:shortCommit]
	}
	if commit == "" {
		commit = "-"
	}
	parts := append([]string{k.String(), commit, strings.TrimPrefix(string(ev), "rollout-")}, detail...)
	return strings.Join(parts, "/")
}

// stepDetail is the alert id detail for the current step and attempt.
func (m *machine) stepDetail() string {
	if m.s.Attempt > 0 {
		return fmt.Sprintf("%d.r%d", m.s.StepIndex, m.s.Attempt)
	}
	return fmt.Sprint(m.s.StepIndex)
}

// invalid records load errors; the spec in force keeps running.
func (m *machine) invalid(e Invalid) {
	errs := e.Errors.Errors()
	if len(errs) == 0 {
		return
	}
	m.s.Errors = errs
	m.s.ErrorCommit = e.Commit
	reason := errs[0].String()
	if len(errs) > 1 {
		reason += fmt.Sprintf(" (and %d more)", len(errs)-1)
	}
	if m.s.Spec != nil {
		reason += "; the previous good version keeps running"
	}
	m.alert(AlertStrategyInvalid, e.Commit, reason)
}

// timerFired completes a timed pause, ends a scale-down delay, acts on
// a progress deadline or moves an experiment on; a stale id is ignored.
func (m *machine) timerFired(e TimerFired) {
	if m.drainTimerFired(e.ID) || m.deadlineFired(e.ID) {
		return
	}
	if m.s.Timer == nil || m.s.Timer.ID != e.ID {
		return
	}
	m.s.Timer = nil
	if !m.s.CanaryActive() || m.s.Cursor != CursorRunning {
		return
	}
	st, _ := m.currentStep()
	switch st.Kind {
	case api.StepExperiment:
		m.experimentTimer() // the deadline or the duration
		return
	case api.StepPause:
		m.s.Cursor = CursorDone
	}
	m.advance()
}

// acked lets a step that waits for its traffic start its window.
func (m *machine) acked(e TrafficAcked) {
	if e.Gen > m.s.TrafficGen {
		return // not ours: a generation we never emitted
	}
	if e.Gen > m.s.AckedGen {
		m.s.AckedGen = e.Gen
		m.s.AckTimedOut = false
		m.s.Unverified = e.Unverified
	}
	m.shareAcked(e.Gen)
	m.armDrains(e.Gen)
	m.settleOn(e.Gen)
	if m.s.Cursor == CursorAwaitAck && e.Gen >= m.s.AwaitGen {
		m.s.Cursor = CursorReady
		if m.s.Hold != nil && m.s.Hold.Kind == HoldNack {
			m.s.Hold = nil
		}
		m.advance()
	}
}

// nacked alerts and, when the current step waits for this traffic, holds
// the canary: its window must not start on routes the clients refused.
func (m *machine) nacked(e TrafficNacked) {
	if e.Gen > m.s.TrafficGen || e.Gen < m.s.AckedGen || m.s.Removed {
		return
	}
	m.alert(AlertXDSNack, m.s.Commit, fmt.Sprintf("xDS traffic generation %d rejected: %s", e.Gen, e.Reason), fmt.Sprint(e.Gen))
	m.settleNacked(e.Gen, e.Reason)
	if m.s.CanaryActive() && m.s.Cursor == CursorAwaitAck && e.Gen >= m.s.AwaitGen {
		m.s.Hold = &Hold{Kind: HoldNack, Reason: "xDS NACK: " + e.Reason}
	}
}

// ackTimeout lets the step go on without an ACK, and says so in status.
func (m *machine) ackTimeout(e TrafficAckTimeout) {
	if e.Gen > m.s.TrafficGen {
		return
	}
	if m.s.Settle != nil && e.Gen >= m.s.Settle.Gen {
		m.s.AckTimedOut = true
		m.settleOn(e.Gen)
	}
	if m.s.Cursor != CursorAwaitAck || e.Gen < m.s.AwaitGen {
		return
	}
	m.s.Cursor = CursorReady
	m.s.AckTimedOut = true
	m.advance()
}

// restart re-emits what a fresh runner has lost: the traffic, the pods
// wanted (Kubernetes mode), the timers and the unfinished analysis runs.
// Traffic the first version's pods still hold back is not pushed.
func (m *machine) restart() {
	if m.s.Spec == nil {
		return
	}
	if m.s.Wait == nil || m.s.Wait.Kind != WaitFirst {
		m.pushTraffic()
	}
	if m.s.Removed {
		return
	}
	m.rescale = true
	if m.s.Timer != nil {
		m.emit(StartTimer{Timer: *m.s.Timer})
	}
	if w := m.s.Wait; w != nil && w.Timer != nil {
		m.emit(StartTimer{Timer: *w.Timer})
	}
	m.rearmDrains()
	for _, name := range append([]string{m.s.StepRun, m.s.BackgroundRun}, m.s.experimentRunNames()...) {
		if r := m.s.run(name); r != nil && !r.Phase.Terminal() {
			m.emit(StartAnalysis{Rollout: m.s.Key, Run: r.Name, Kind: r.Kind, Analysis: r.Analysis, Args: r.Args})
		}
	}
	m.advance()
}
