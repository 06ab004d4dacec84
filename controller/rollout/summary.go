package rollout

import (
	"fmt"
	"strings"
)

// summarize derives Phase and Message from the rest of the state, in one
// place, at the end of every Step.
func (m *machine) summarize() {
	s := &m.s
	s.Phase, s.Message = phaseAndMessage(*s)
	if len(s.Errors) > 0 {
		msg := fmt.Sprintf("invalid strategy in commit %s: %s", short(s.ErrorCommit), s.Errors[0].String())
		if s.Spec != nil {
			msg += "; the previous good version keeps running (" + s.Message + ")"
		}
		s.Message = msg
	}
	if c := s.WaveCancelled; c != nil {
		s.Message += fmt.Sprintf("; canary %s from commit %s never started: %s", c.Version, short(c.Commit), c.Reason)
	}
	if s.Removed {
		s.Message = "not managed: rollout file removed; traffic left as it was (" + s.Message + ")"
	}
}

func phaseAndMessage(s State) (Phase, string) {
	n := s.StepCount()
	at := func() string {
		if st, ok := (&machine{s: s}).currentStep(); ok {
			return fmt.Sprintf("step %d/%d: %s", s.StepIndex+1, n, st)
		}
		if s.StepIndex >= n && s.CanaryVersion != "" {
			return "promoting " + s.CanaryVersion
		}
		return fmt.Sprintf("step %d/%d", s.StepIndex+1, n)
	}
	switch {
	case s.Spec == nil:
		if len(s.Errors) > 0 {
			return PhaseDegraded, "invalid strategy"
		}
		return "", ""
	case s.Queued != nil:
		return PhaseProgressing, queuedMessage(s)
	case s.WaveWait != nil:
		return PhaseProgressing, waveMessage(s)
	case s.Aborted && s.Wait != nil && s.Wait.Kind == WaitAbort:
		return PhaseProgressing, fmt.Sprintf("aborting at step %d/%d: %s; %s before traffic goes back to %s", s.StepIndex+1, n, s.AbortReason, s.waitMessage(), s.StableVersion)
	case s.Aborted:
		msg := fmt.Sprintf("aborted at step %d/%d: %s", s.StepIndex+1, n, s.AbortReason)
		if settling, ok := settlingMessage(s, fmt.Sprintf("aborting at step %d/%d: %s; all traffic back to %s", s.StepIndex+1, n, s.AbortReason, s.StableVersion)); ok {
			return PhaseProgressing, settling
		}
		// A risky change can arrive while the rollout is aborted: it
		// waits for approval too, and must not be hidden by the abort.
		if s.Pending != nil {
			msg += "; " + approvalMessage(s)
		}
		return PhaseDegraded, msg + ackNote(s)
	case s.Pending != nil:
		return PhasePaused, approvalMessage(s)
	case s.Wait != nil && s.Wait.Kind == WaitFirst:
		return PhaseProgressing, fmt.Sprintf("stable %s: %s before it gets traffic", s.StableVersion, s.waitMessage())
	case s.CanaryVersion == "":
		msg := fmt.Sprintf("stable %s at 100%%", s.StableVersion)
		pending := msg
		if s.Settle != nil && s.Settle.Kind == SettlePromotion {
			pending = fmt.Sprintf("promoting %s to stable at 100%%", s.StableVersion)
		}
		if settling, ok := settlingMessage(s, pending); ok {
			return PhaseProgressing, settling
		}
		return PhaseHealthy, msg + ackNote(s)
	case s.Removed:
		return PhasePaused, at()
	case s.UserPaused:
		return PhasePaused, at() + " (paused by operator)"
	case s.Hold != nil:
		return PhasePaused, at() + " (" + s.Hold.Reason + ")"
	case s.WaveHeld:
		return PhasePaused, heldMessage(s)
	}
	msg := at()
	st, _ := (&machine{s: s}).currentStep()
	switch s.Cursor {
	case CursorAwaitPods:
		msg += " (" + s.waitMessage() + ")"
	case CursorAwaitAck:
		msg += " (waiting for xDS ACK)"
	case CursorRunning, CursorDone:
		if st.Kind == "pause" {
			return PhasePaused, msg + ackNote(s)
		}
		if x := s.Experiment; x != nil && !x.Available {
			msg += " (waiting for the experiment's pods to be Ready)"
		}
	}
	return PhaseProgressing, msg + ackNote(s)
}

// approvalMessage says which commit waits for `sluice approve`, and why.
func approvalMessage(s State) string {
	return fmt.Sprintf("waiting for approval of commit %s: %s", short(s.Pending.Commit), strings.Join(s.Pending.Reasons, "; "))
}

func ackNote(s State) string {
	if s.AckTimedOut {
		return " (xDS ACK timed out; went on without it)"
	}
	if s.Unverified != "" {
		return " (" + s.Unverified + ")"
	}
	return ""
}

// short is a commit's 7-character prefix.
func short(commit string) string {
	if len(commit) > shortCommit {
		return commit[:shortCommit]
	}
	return commit
}
