package runner

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/rollout"
)

// TestHeldTrafficNeverLetsStepGoOn: traffic held back unpublished (in
// Kubernetes mode, a side with a weight has no Ready endpoint yet) is
// known not to be in force, unlike a slow ACK. The step waits for it past
// any number of ACK timeouts instead of starting its pause or analysis on
// the old weights, goes on once it is published and ACKed, and an abort
// still supersedes the wait.
func TestHeldTrafficNeverLetsStepGoOn(t *testing.T) {
	const ackTimeout = 50 * time.Millisecond
	steps := []api.Step{setWeight(10), pause(time.Hour)}
	start := func(t *testing.T) *env {
		e := newEnv(t, envOptions{ackTimeout: ackTimeout})
		e.do(checkout, rollout.Change{Commit: "1111111", Rollout: spec(checkout, "v1", steps...)})
		e.traffic.setMode("held")
		e.do(checkout, rollout.Change{Commit: "2222222", Rollout: spec(checkout, "v2", steps...)})
		time.Sleep(8 * ackTimeout) // several rounds of the ACK wait
		s, _ := e.runner.State(checkout)
		if s.StepIndex != 0 || s.AckTimedOut || strings.Contains(s.Message, "ACK timed out") || e.traffic.waitingCount() != 1 {
			t.Fatalf("after %v held: step %d, ackTimedOut %v, %q, %d waits; want step 0 still waiting for its traffic",
				8*ackTimeout, s.StepIndex, s.AckTimedOut, s.Message, e.traffic.waitingCount())
		}
		return e
	}

	t.Run("published", func(t *testing.T) {
		e := start(t)
		e.traffic.release()
		s := e.waitState(checkout, "paused at step 1", func(s rollout.State) bool { return s.StepIndex == 1 && s.Phase == rollout.PhasePaused })
		if s.AckTimedOut || s.Weights != api.CanaryWeights(10) {
			t.Fatalf("after the publish: ackTimedOut %v, weights %+v; want the step's ACK, weight 10", s.AckTimedOut, s.Weights)
		}
	})

	t.Run("aborted", func(t *testing.T) {
		e := start(t)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		e.traffic.setMode("ack")
		if _, err := e.runner.Command(ctx, checkout, rollout.CmdAbort); err != nil {
			t.Fatal(err)
		}
		s := e.waitState(checkout, "aborted", func(s rollout.State) bool { return s.Phase == rollout.PhaseDegraded })
		if s.Weights != api.CanaryWeights(0) {
			t.Fatalf("aborted with weights %+v; want all on stable", s.Weights)
		}
		eventually(t, "the held wait superseded", func() bool { return e.traffic.waitingCount() == 0 })
	})
}
