package rollout

import (
	"errors"
	"fmt"
)

// ErrNotAllowed is wrapped by Allows when a command does not apply to the
// rollout's current state.
var ErrNotAllowed = errors.New("command not allowed")

// Allows says whether cmd applies to s, and why not. Step ignores the
// commands Allows refuses, so callers ask first to answer the operator.
func (s State) Allows(cmd CommandKind) error {
	refuse := func(why string) error { return fmt.Errorf("%s %s: %s: %w", cmd, s.Key, why, ErrNotAllowed) }
	if s.Spec == nil || s.Removed {
		return refuse("rollout is not managed")
	}
	switch cmd {
	case CmdPromote, CmdPromoteFull:
		if !s.CanaryActive() {
			return refuse(s.noCanary())
		}
		if s.Pending != nil {
			return refuse("a change waits for approval; approve it first")
		}
		if s.WaveHeld {
			return refuse("it holds at 100% for the later waves of its rollout, which promote it once every wave has passed (abort still applies)")
		}
	case CmdAbort:
		if !s.CanaryActive() {
			return refuse(s.noCanary())
		}
	case CmdRetry:
		if s.Queued != nil {
			// The queued version replaces the aborted one when it starts.
			return refuse("a new version waits for a canary slot")
		}
		if s.WaveWait != nil {
			return refuse("a new version waits for its wave")
		}
		if !s.Aborted && (s.Hold == nil || s.Hold.Kind != HoldInconclusive && s.Hold.Kind != HoldProgressDeadline) {
			return refuse("nothing to retry: not aborted, no inconclusive analysis and no progress deadline")
		}
	case CmdApprove:
		if s.Pending == nil {
			return refuse("no change waits for approval")
		}
	case CmdPause:
		if !s.CanaryActive() {
			return refuse(s.noCanary())
		}
		if s.UserPaused {
			return refuse("already paused")
		}
	case CmdResume:
		if !s.UserPaused && s.Hold == nil {
			return refuse("not paused")
		}
	default:
		return refuse("unknown command")
	}
	return nil
}

func (s State) noCanary() string {
	if s.Aborted {
		return "canary aborted; retry or push a new version"
	}
	return "no canary in flight"
}

// command carries out an operator command that Allows accepts.
func (m *machine) command(c Command) {
	if m.s.Allows(c.Kind) != nil {
		return
	}
	switch c.Kind {
	case CmdPromote:
		m.s.UserPaused = false
		if m.s.Hold != nil && m.s.Hold.Kind == HoldInconclusive && m.s.Hold.Run == m.s.BackgroundRun {
			// The background run stays finished; promote only lets go.
			m.s.Hold = nil
		} else if m.s.Cursor != CursorEnter {
			// Promote completes the current step, whatever it waits for.
			m.stopStepWork()
			m.s.Cursor = CursorDone
		}
		m.s.Hold = nil
		m.advance()
	case CmdPromoteFull:
		m.promoteFull()
	case CmdAbort:
		m.abort("aborted by operator")
	case CmdRetry:
		m.retry()
	case CmdApprove:
		p := m.s.Pending
		m.s.Pending = nil
		m.apply(p.Commit, p.Rollout, p.ResumeStep, p.Ticket)
		m.advance()
	case CmdPause:
		m.s.UserPaused = true
		m.alert(AlertRolloutPaused, m.s.Commit, fmt.Sprintf("paused by operator at step %d/%d", m.s.StepIndex+1, m.s.StepCount()), m.stepDetail(), fmt.Sprintf("s%d", m.s.Seq+1))
	case CmdResume:
		m.s.UserPaused = false
		if h := m.s.Hold; h != nil {
			switch h.Kind {
			case HoldNack:
				// The operator accepts going on without the ACK.
				if m.s.Cursor == CursorAwaitAck {
					m.s.Cursor = CursorReady
				}
				m.s.Hold = nil
			case HoldInconclusive:
				// Resume never skips verification: the analysis runs again.
				m.rerun(h.Run)
			case HoldProgressDeadline:
				// The wait for pods goes on with a fresh deadline.
				m.releaseDeadline()
			case HoldRecovered:
				// The recovered step's window (pause or analysis) runs
				// again, once its traffic is ACKed: nothing is skipped.
				m.s.Hold = nil
			}
		}
		m.advance()
	}
}

// retry restarts an aborted canary from the first step, or runs an
// inconclusive analysis again.
func (m *machine) retry() {
	if !m.s.Aborted {
		if m.s.Hold.Kind == HoldProgressDeadline {
			m.releaseDeadline()
		} else {
			m.rerun(m.s.Hold.Run)
		}
		m.advance()
		return
	}
	m.clearWait() // an abort still waiting for stable pods: the canary is back
	m.s.Aborted = false
	m.s.AbortReason = ""
	m.s.Attempt++
	m.s.StepIndex = 0
	m.s.Cursor = CursorEnter
	m.s.StepRun = ""
	m.s.BackgroundRun = ""
	m.s.Hold = nil
	m.s.UserPaused = false
	m.alert(AlertRolloutStarted, m.s.Commit, fmt.Sprintf("retry %d of canary %s against stable %s", m.s.Attempt, m.s.CanaryVersion, m.s.StableVersion), fmt.Sprintf("r%d", m.s.Attempt))
	m.advance()
}

// rerun releases an inconclusive hold so that its analysis starts again.
func (m *machine) rerun(run string) {
	m.s.Hold = nil
	switch run {
	case m.s.StepRun:
		m.s.StepRun = ""
		if m.s.Cursor == CursorRunning {
			m.s.Cursor = CursorReady
		}
	case m.s.BackgroundRun:
		m.s.BackgroundRun = ""
	default:
		if m.s.experimentRun(run) {
			m.restartExperimentRuns()
		}
	}
}
