package rollout

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// Preludes put the rollout in a known state; each builds on the one
// before. The strategy: setWeight 20; pause 30s; analysis sr;
// setWeight 50; pause, with background analysis "er" from step 2.
var (
	pSpecs = []string{
		`spec v1 version=v1 bg=er@2 steps="setWeight 20; pause 30s; analysis sr; setWeight 50; pause"`,
		`spec v2 version=v2 bg=er@2 steps="setWeight 20; pause 30s; analysis sr; setWeight 50; pause"`,
		`spec v3 version=v3 bg=er@2 steps="setWeight 20; pause 30s; analysis sr; setWeight 50; pause"`,
		`spec v2-more version=v2 bg=er@2 steps="setWeight 20; pause 30s; analysis sr; setWeight 50; pause; setWeight 70; pause"`,
		`spec v2-short version=v2 bg=er@2 steps="setWeight 20"`,
		`spec v2-host version=v2 host=other.internal bg=er@2 steps="setWeight 20; pause 30s; analysis sr; setWeight 50; pause"`,
		`spec v2-inserted version=v2 bg=er@2 steps="setWeight 20; setWeight 30; pause 30s; analysis sr; setWeight 50; pause"`,
	}
	pFirst       = append(pSpecs[:len(pSpecs):len(pSpecs)], "change v1 commit=aaaaaaa1")
	pHealthy     = append(pFirst[:len(pFirst):len(pFirst)], "ack")
	pAwaitAck    = append(pHealthy[:len(pHealthy):len(pHealthy)], "change v2 commit=bbbbbbb2")
	pTimedPause  = append(pAwaitAck[:len(pAwaitAck):len(pAwaitAck)], "ack")
	pAnalysis    = append(pTimedPause[:len(pTimedPause):len(pTimedPause)], "fire")
	pAwaitAck50  = append(pAnalysis[:len(pAnalysis):len(pAnalysis)], "result phase=Successful")
	pFinalPause  = append(pAwaitAck50[:len(pAwaitAck50):len(pAwaitAck50)], "ack")
	pAborting    = append(pTimedPause[:len(pTimedPause):len(pTimedPause)], "abort")
	pAborted     = append(pAborting[:len(pAborting):len(pAborting)], "ack")
	pPromoting   = append(pFinalPause[:len(pFinalPause):len(pFinalPause)], "promote")
	pUserPaused  = append(pTimedPause[:len(pTimedPause):len(pTimedPause)], "pause")
	pPending     = append(pTimedPause[:len(pTimedPause):len(pTimedPause)], `change v2-more commit=ccccccc3 risky="weight jump"`)
	pInconclusiv = append(pAnalysis[:len(pAnalysis):len(pAnalysis)], "result phase=Inconclusive")
	pNacked      = append(pAwaitAck[:len(pAwaitAck):len(pAwaitAck)], "nack reason=bad")
	pRemoved     = append(pTimedPause[:len(pTimedPause):len(pTimedPause)], "remove commit=ccccccc3")
	pBgHold      = append(pFinalPause[:len(pFinalPause):len(pFinalPause)], "result run=background phase=Inconclusive")
	pRecovered   = append(pSpecs[:len(pSpecs):len(pSpecs)], `recover v1 v2 source=cluster step=2 weight=20 commit=bbbbbbb2`, "ack")
	// Under a limit on concurrent canaries (queue.go).
	pQueued        = append(pHealthy[:len(pHealthy):len(pHealthy)], "change v2 commit=bbbbbbb2 ticket=5")
	pQueuedPending = append(pQueued[:len(pQueued):len(pQueued)], `change v3 commit=ccccccc3 ticket=6 risky="weight jump"`)
)

// Kubernetes-mode preludes: 2 replicas; the strategy: setWeight 50;
// pause 30s; setCanaryScale 4; setWeight 100; pause.
var (
	kSteps = `steps="setWeight 50; pause 30s; scale 4; setWeight 100; pause"`
	kSpecs = []string{
		`spec k1 version=v1 hash=h1 replicas=2 ` + kSteps,
		`spec k2 version=v2 hash=h2 replicas=2 ` + kSteps,
		`spec k3 version=v3 hash=h3 replicas=2 ` + kSteps,
		`spec k2-abort version=v2 hash=h2 replicas=2 deadlineAbort=true ` + kSteps,
		`spec k2-template version=v1 hash=h9 replicas=2 ` + kSteps,
		`spec k1-one version=v1 hash=h1 replicas=1 ` + kSteps,
		`spec d1 version=v1 hash=h1 replicas=2 dss=true ` + kSteps,
		`spec d2 version=v2 hash=h2 replicas=2 dss=true ` + kSteps,
	}
	kFirst       = append(kSpecs[:len(kSpecs):len(kSpecs)], "change k1 commit=aaaaaaa1")
	kHealthy     = append(kFirst[:len(kFirst):len(kFirst)], "pods h1 ready=2", "ack")
	kAwaitPods   = append(kHealthy[:len(kHealthy):len(kHealthy)], "change k2 commit=bbbbbbb2")
	kAwaitAbort  = append(kHealthy[:len(kHealthy):len(kHealthy)], "change k2-abort commit=bbbbbbb2")
	kHeld        = append(kAwaitPods[:len(kAwaitPods):len(kAwaitPods)], "fire deadline")
	kAwaitAck    = append(kAwaitPods[:len(kAwaitPods):len(kAwaitPods)], "pods h2 ready=1")
	kPause       = append(kAwaitAck[:len(kAwaitAck):len(kAwaitAck)], "ack")
	kPromoWait   = append(kPause[:len(kPause):len(kPause)], "promote-full")
	kPromoting   = append(kPromoWait[:len(kPromoWait):len(kPromoWait)], "pods h2 ready=2")
	kDraining    = append(kPromoting[:len(kPromoting):len(kPromoting)], "ack")
	kAborting    = append(kPause[:len(kPause):len(kPause)], "abort")
	kAborted     = append(kAborting[:len(kAborting):len(kAborting)], "ack")
	kdHealthy    = append(kSpecs[:len(kSpecs):len(kSpecs)], "change d1 commit=aaaaaaa1", "pods h1 ready=2", "ack")
	kdAwaitAck   = append(kdHealthy[:len(kdHealthy):len(kdHealthy)], "change d2 commit=bbbbbbb2", "pods h2 ready=1")
	kdPause      = append(kdAwaitAck[:len(kdAwaitAck):len(kdAwaitAck)], "ack", "pods h1 ready=1")
	kdAbortWaits = append(kdPause[:len(kdPause):len(kdPause)], "abort")

	// With a baseline (the rollout's analysis uses the judge): b1 is v1's
	// baseline hash.
	kbSpecs = []string{
		`spec b1 version=v1 hash=h1 baseline=b1 replicas=2 ` + kSteps,
		`spec b2 version=v2 hash=h2 baseline=b2 replicas=2 ` + kSteps,
		`spec b3 version=v3 hash=h3 baseline=b3 replicas=2 ` + kSteps,
		`spec b2-nojudge version=v2 hash=h2 replicas=2 ` + kSteps,
	}
	kbHealthy      = append(kbSpecs[:len(kbSpecs):len(kbSpecs)], "change b1 commit=aaaaaaa1", "pods h1 ready=2", "ack")
	kbAwaitPods    = append(kbHealthy[:len(kbHealthy):len(kbHealthy)], "change b2 commit=bbbbbbb2")
	kbAwaitBase    = append(kbAwaitPods[:len(kbAwaitPods):len(kbAwaitPods)], "pods h2 ready=1")
	kbPause        = append(kbAwaitBase[:len(kbAwaitBase):len(kbAwaitBase)], "pods b1 ready=1", "ack")
	kbPromoWait    = append(kbPause[:len(kbPause):len(kbPause)], "promote-full")
	kbPromoting    = append(kbPromoWait[:len(kbPromoWait):len(kbPromoWait)], "pods h2 ready=2")
	kbPromoAcked   = append(kbPromoting[:len(kbPromoting):len(kbPromoting)], "ack")
	kbAbortedAcked = append(kbPause[:len(kbPause):len(kbPause)], "abort", "ack")
)

// kindOf names an action for the table: its type, or the event of an alert.
func kindOf(a Action) string {
	switch a := a.(type) {
	case SetTraffic:
		return "set-traffic"
	case ScaleWorkloads:
		return "scale-workloads"
	case StartAnalysis:
		return "start-analysis:" + string(a.Kind)
	case StopAnalysis:
		return "stop-analysis"
	case StartTimer:
		return "start-timer"
	case CancelTimer:
		return "cancel-timer"
	case Notify:
		return string(a.Alert.Event)
	}
	return fmt.Sprintf("%T", a)
}

// TestTransitions covers every (state, event) transition of the machine:
// the phase, step, canary weight and the actions, in order.
func TestTransitions(t *testing.T) {
	tests := []struct {
		name    string
		prelude []string
		event   string
		phase   Phase
		step    int32
		canary  int32
		aborted bool
		actions []string // nil: the event changes nothing at all
	}{
		{"first version waits for its ack", pSpecs, "change v1 commit=aaaaaaa1", PhaseProgressing, 5, 0, false, []string{"set-traffic"}},
		{"first version is healthy on its ack", pFirst, "ack", PhaseHealthy, 5, 0, false, []string{}},
		{"first version is healthy on ack timeout", pFirst, "acktimeout", PhaseHealthy, 5, 0, false, []string{}},
		{"cosmetic change when healthy", pHealthy, "change v1 commit=abcdef9 class=Cosmetic", PhaseHealthy, 5, 0, false, []string{}},
		{"new version starts canary at step 0", pHealthy, "change v2 commit=bbbbbbb2", PhaseProgressing, 0, 20, false, []string{"set-traffic", "rollout-started"}},
		{"ack starts the timed pause", pAwaitAck, "ack", PhasePaused, 1, 20, false, []string{"step-completed", "start-timer"}},
		{"stale ack keeps waiting", pAwaitAck, "ack gen=1", PhaseProgressing, 0, 20, false, nil},
		{"ack of unknown generation ignored", pAwaitAck, "ack gen=42", PhaseProgressing, 0, 20, false, nil},
		{"ack timeout goes on", pAwaitAck, "acktimeout", PhasePaused, 1, 20, false, []string{"step-completed", "start-timer"}},
		{"nack holds the step", pAwaitAck, "nack reason=bad", PhasePaused, 0, 20, false, []string{"xds-nack"}},
		{"ack after nack releases", pNacked, "ack", PhasePaused, 1, 20, false, []string{"step-completed", "start-timer"}},
		{"resume after nack goes on", pNacked, "resume", PhasePaused, 1, 20, false, []string{"step-completed", "start-timer"}},
		{"timer completes pause, analysis and background start", pTimedPause, "fire", PhaseProgressing, 2, 20, false, []string{"step-completed", "start-analysis:background", "start-analysis:step"}},
		{"stale timer ignored", pTimedPause, "fire id=pause/9/9", PhasePaused, 1, 20, false, nil},
		{"analysis progress records metrics", pAnalysis, "result phase=Running metric=sr value=0.99", PhaseProgressing, 2, 20, false, []string{}},
		{"analysis success moves on", pAnalysis, "result phase=Successful", PhaseProgressing, 3, 50, false, []string{"set-traffic", "step-completed"}},
		{"analysis inconclusive pauses", pAnalysis, "result phase=Inconclusive", PhasePaused, 2, 20, false, []string{"rollout-paused"}},
		{"analysis failed aborts", pAnalysis, "result phase=Failed metric=sr value=0.5", PhaseProgressing, 2, 0, true, []string{"set-traffic", "analysis-failed", "stop-analysis", "rollout-aborted"}},
		{"analysis error aborts", pAnalysis, "result phase=Error", PhaseProgressing, 2, 0, true, []string{"set-traffic", "analysis-error", "stop-analysis", "rollout-aborted"}},
		{"background failure aborts at final pause", pFinalPause, "result run=background phase=Failed", PhaseProgressing, 4, 0, true, []string{"set-traffic", "analysis-failed", "rollout-aborted"}},
		{"background success keeps going", pFinalPause, "result run=background phase=Successful", PhasePaused, 4, 50, false, []string{}},
		{"result for unknown run ignored", pAnalysis, "result run=nope-1 phase=Failed", PhaseProgressing, 2, 20, false, nil},
		{"promote at final pause waits for the ack", pFinalPause, "promote", PhaseProgressing, 5, 0, false, []string{"set-traffic", "step-completed", "stop-analysis"}},
		{"promotion completes on its ack", pPromoting, "ack", PhaseHealthy, 5, 0, false, []string{"rollout-completed"}},
		{"promotion completes on ack timeout", pPromoting, "acktimeout", PhaseHealthy, 5, 0, false, []string{"rollout-completed"}},
		{"promotion ignores the ack of older traffic", pPromoting, "ack gen=3", PhaseProgressing, 5, 0, false, nil},
		{"promotion nacked stays unsettled", pPromoting, "nack reason=bad", PhaseProgressing, 5, 0, false, []string{"xds-nack"}},
		{"promotion settles on the ack of a restart's push", pPromoting, "restart", PhaseProgressing, 5, 0, false, []string{"set-traffic"}},
		{"abort completes on its ack", pAborting, "ack", PhaseDegraded, 1, 0, true, []string{}},
		{"abort completes on ack timeout", pAborting, "acktimeout", PhaseDegraded, 1, 0, true, []string{}},
		{"promote at timed pause skips it", pTimedPause, "promote", PhaseProgressing, 2, 20, false, []string{"cancel-timer", "step-completed", "start-analysis:background", "start-analysis:step"}},
		{"promote at inconclusive skips the analysis", pInconclusiv, "promote", PhaseProgressing, 3, 50, false, []string{"set-traffic", "step-completed"}},
		{"retry at inconclusive re-runs the analysis", pInconclusiv, "retry", PhaseProgressing, 2, 20, false, []string{"start-analysis:step"}},
		{"resume at inconclusive re-runs the analysis", pInconclusiv, "resume", PhaseProgressing, 2, 20, false, []string{"start-analysis:step"}},
		{"promote full goes to 100", pTimedPause, "promote-full", PhaseProgressing, 5, 0, false, []string{"set-traffic", "cancel-timer"}},
		{"abort sends all to stable", pTimedPause, "abort", PhaseProgressing, 1, 0, true, []string{"set-traffic", "cancel-timer", "rollout-aborted"}},
		{"abort while waiting for ack", pAwaitAck, "abort", PhaseProgressing, 0, 0, true, []string{"set-traffic", "rollout-aborted"}},
		{"aborted ignores acks", pAborted, "ack", PhaseDegraded, 1, 0, true, nil},
		{"aborted refuses promote", pAborted, "promote", PhaseDegraded, 1, 0, true, nil},
		{"retry restarts from step 0", pAborted, "retry", PhaseProgressing, 0, 20, false, []string{"set-traffic", "rollout-started"}},
		{"new version after abort", pAborted, "change v3 commit=ccccccc3", PhaseProgressing, 0, 20, false, []string{"set-traffic", "rollout-started"}},
		{"same version after abort stays aborted", pAborted, "change v2 commit=ccccccc3 class=Cosmetic", PhaseDegraded, 1, 0, true, []string{}},
		{"pause holds", pTimedPause, "pause", PhasePaused, 1, 20, false, []string{"rollout-paused"}},
		{"timer while paused completes the step only", pUserPaused, "fire", PhasePaused, 1, 20, false, []string{}},
		{"resume continues", pUserPaused, "resume", PhasePaused, 1, 20, false, []string{}},
		{"risky change waits for approval", pTimedPause, `change v2-more commit=ccccccc3 risky="weight jump"`, PhasePaused, 1, 20, false, []string{"rollout-paused"}},
		{"approve applies the change", pPending, "approve", PhasePaused, 1, 20, false, []string{}},
		{"newer safe change supersedes pending", pPending, "change v2 commit=ddddddd4", PhasePaused, 1, 20, false, []string{}},
		{"promote refused while pending", pPending, "promote", PhasePaused, 1, 20, false, nil},
		{"new version mid-canary replaces it", pAnalysis, "change v3 commit=ccccccc3", PhaseProgressing, 0, 20, false, []string{"set-traffic", "stop-analysis", "stop-analysis", "rollout-started"}},
		{"stable version mid-canary rolls back", pAnalysis, "change v1 commit=ccccccc3", PhaseProgressing, 5, 0, false, []string{"set-traffic", "stop-analysis", "stop-analysis"}},
		{"edit keeps the current step", pTimedPause, "change v2-more commit=ccccccc3 class=StrategyEdit", PhasePaused, 1, 20, false, []string{}},
		{"edit with a step inserted before the current one follows it", pTimedPause, "change v2-inserted commit=ccccccc3 class=StrategyEdit resume=2", PhasePaused, 2, 20, false, []string{"start-analysis:background"}},
		{"edit without a resume position keeps the index", pTimedPause, "change v2-inserted commit=ccccccc3 class=StrategyEdit", PhaseProgressing, 1, 30, false, []string{"set-traffic", "cancel-timer"}},
		{"edit clamped past the end promotes", pTimedPause, "change v2-short commit=ccccccc3 class=StrategyEdit", PhaseProgressing, 1, 0, false, []string{"set-traffic", "cancel-timer"}},
		{"endpoint edit pushes traffic", pTimedPause, "change v2-host commit=ccccccc3 class=EndpointsOnly", PhasePaused, 1, 20, false, []string{"set-traffic"}},
		{"removed stops managing", pTimedPause, "remove commit=ccccccc3", PhasePaused, 1, 20, false, []string{"cancel-timer", "rollout-unmanaged"}},
		{"invalid keeps the spec in force", pTimedPause, `invalid commit=ccccccc3 error="bad"`, PhasePaused, 1, 20, false, []string{"strategy-invalid"}},
		{"restart re-arms timer and traffic", pTimedPause, "restart", PhasePaused, 1, 20, false, []string{"set-traffic", "start-timer"}},
		{"restart restarts running analyses", pAnalysis, "restart", PhaseProgressing, 2, 20, false, []string{"set-traffic", "start-analysis:step", "start-analysis:background"}},
		{"promote refused when healthy", pHealthy, "promote", PhaseHealthy, 5, 0, false, nil},
		{"invalid with no good version is degraded", pSpecs, `invalid commit=aaaaaaa1 error="bad"`, PhaseDegraded, 0, 0, false, []string{"strategy-invalid"}},
		{"added back after removal restarts the step", pRemoved, "change v2 commit=ddddddd4 class=Added", PhasePaused, 1, 20, false, []string{"start-timer"}},
		{"removed ignores timers", pRemoved, "fire id=pause/1/4", PhasePaused, 1, 20, false, nil},
		{"removed refuses commands", pRemoved, "abort", PhasePaused, 1, 20, false, nil},
		{"nack of traffic not awaited only alerts", pTimedPause, "nack gen=2 reason=late", PhasePaused, 1, 20, false, []string{"xds-nack"}},
		{"stale ack timeout ignored", pTimedPause, "acktimeout gen=1", PhasePaused, 1, 20, false, nil},
		{"background inconclusive pauses", pFinalPause, "result run=background phase=Inconclusive", PhasePaused, 4, 50, false, []string{"rollout-paused"}},
		{"promote releases a background hold only", pBgHold, "promote", PhasePaused, 4, 50, false, []string{}},
		{"retry re-runs an inconclusive background", pBgHold, "retry", PhasePaused, 4, 50, false, []string{"start-analysis:background"}},
		{"new version without a slot queues", pHealthy, "change v2 commit=bbbbbbb2 ticket=5", PhaseProgressing, 5, 0, false, []string{}},
		{"slot starts the queued canary", pQueued, "slot", PhaseProgressing, 0, 20, false, []string{"set-traffic", "rollout-started"}},
		{"recovery from git re-runs the canary from step 1", pSpecs, `recover v1 v2 source=git commit=bbbbbbb2`, PhaseProgressing, 0, 20, false, []string{"set-traffic", "rollout-state-recovered", "rollout-started"}},
		{"recovery from the cluster holds the canary at its step", pSpecs, `recover v1 v2 source=cluster step=3 weight=50 commit=bbbbbbb2`, PhasePaused, 3, 50, false, []string{"set-traffic", "rollout-state-recovered"}},
		{"recovery holds before a step above the weight found", pSpecs, `recover v1 v2 source=cluster step=3 weight=20 commit=bbbbbbb2`, PhasePaused, 3, 20, false, []string{"set-traffic", "rollout-state-recovered"}},
		{"recovery of a canary before its first weight holds at 0", pSpecs, `recover v1 v2 source=cluster step=0 weight=0 commit=bbbbbbb2`, PhasePaused, 0, 0, false, []string{"set-traffic", "rollout-state-recovered"}},
		{"recovery finding only the stable keeps it", pSpecs, `recover v2 source=cluster commit=bbbbbbb2`, PhaseProgressing, 5, 0, false, []string{"set-traffic", "rollout-state-recovered"}},
		{"resume after recovery runs the step's window again", pRecovered, "resume", PhaseProgressing, 2, 20, false, []string{"start-analysis:background", "start-analysis:step"}},
		{"promote after recovery completes the step", pRecovered, "promote", PhaseProgressing, 3, 50, false, []string{"set-traffic", "start-analysis:background", "step-completed"}},
		{"abort after recovery goes back to stable", pRecovered, "abort", PhaseProgressing, 2, 0, true, []string{"set-traffic", "rollout-aborted"}},
		{"recovery with a record is a plain change", pTimedPause, `recover v1 v3 source=git commit=ccccccc3`, PhaseProgressing, 0, 20, false, []string{"set-traffic", "cancel-timer", "rollout-started"}},
		{"slot without a queued canary ignored", pTimedPause, "slot", PhasePaused, 1, 20, false, nil},
		{"queued: newer version keeps the place", pQueued, "change v3 commit=ccccccc3 ticket=9", PhaseProgressing, 5, 0, false, []string{}},
		{"queued: the stable version drops the queue", pQueued, "change v1 commit=ccccccc3 ticket=9", PhaseHealthy, 5, 0, false, []string{}},
		{"queued: risky change leaves the queue", pQueued, `change v3 commit=ccccccc3 ticket=6 risky="weight jump"`, PhasePaused, 5, 0, false, []string{"rollout-paused"}},
		{"queued: approve queues again", pQueuedPending, "approve", PhaseProgressing, 5, 0, false, []string{}},
		{"queued: removed leaves the queue", pQueued, "remove commit=ccccccc3", PhaseHealthy, 5, 0, false, []string{"rollout-unmanaged"}},
		{"queued: restart pushes stable only", pQueued, "restart", PhaseProgressing, 5, 0, false, []string{"set-traffic"}},
		{"new version with a slot replaces the canary", pTimedPause, "change v3 commit=ccccccc3 ticket=5", PhaseProgressing, 0, 20, false, []string{"set-traffic", "cancel-timer", "rollout-started"}},
		{"retry refused while a new version is queued", append(pAborted[:len(pAborted):len(pAborted)], "change v3 commit=ccccccc3 ticket=5"), "retry", PhaseProgressing, 1, 0, true, nil},
		{"aborted new edit keeps it aborted", pAborted, "change v2-more commit=ccccccc3 class=StrategyEdit", PhaseDegraded, 1, 0, true, []string{}},

		// Kubernetes mode.
		{"k8s: first version waits for its pods", kSpecs, "change k1 commit=aaaaaaa1", PhaseProgressing, 5, 0, false, []string{"scale-workloads", "start-timer"}},
		{"k8s: first version's traffic goes once its pods are ready", kFirst, "pods h1 ready=2", PhaseProgressing, 5, 0, false, []string{"set-traffic", "cancel-timer"}},
		{"k8s: first version short of pods re-arms the deadline", kFirst, "pods h1 ready=1", PhaseProgressing, 5, 0, false, []string{"cancel-timer", "start-timer"}},
		{"k8s: first version past its deadline keeps waiting", kFirst, "fire deadline", PhaseProgressing, 5, 0, false, []string{}},
		{"k8s: first version edited to fewer replicas goes once they are ready", append(kFirst[:len(kFirst):len(kFirst)], "pods h1 ready=1"), "change k1-one commit=abcdef9", PhaseProgressing, 5, 0, false, []string{"set-traffic", "scale-workloads", "cancel-timer"}},
		{"k8s: first version not pushed by a restart", kFirst, "restart", PhaseProgressing, 5, 0, false, []string{"scale-workloads", "start-timer"}},
		{"k8s: new version scales the canary before any weight", kHealthy, "change k2 commit=bbbbbbb2", PhaseProgressing, 0, 0, false, []string{"set-traffic", "scale-workloads", "rollout-started", "start-timer"}},
		{"k8s: same image with a new pod template is a new canary", kHealthy, "change k2-template commit=bbbbbbb2", PhaseProgressing, 0, 0, false, []string{"set-traffic", "scale-workloads", "rollout-started", "start-timer"}},
		{"k8s: canary pods ready push the weight", kAwaitPods, "pods h2 ready=1", PhaseProgressing, 0, 50, false, []string{"set-traffic", "scale-workloads", "cancel-timer"}},
		{"k8s: canary pods not ready keep waiting", kAwaitPods, "pods h2 ready=0 replicas=1", PhaseProgressing, 0, 0, false, []string{}},
		{"k8s: progress deadline holds the canary", kAwaitPods, "fire deadline", PhasePaused, 0, 0, false, []string{"rollout-paused"}},
		{"k8s: progress deadline aborts with progressDeadlineAbort", kAwaitAbort, "fire deadline", PhaseProgressing, 0, 0, true, []string{"scale-workloads", "set-traffic", "rollout-aborted"}},
		{"k8s: stale deadline ignored", kAwaitPods, "fire id=deadline/9/9", PhaseProgressing, 0, 0, false, nil},
		{"k8s: pods arriving release a deadline hold", kHeld, "pods h2 ready=1", PhaseProgressing, 0, 50, false, []string{"set-traffic", "scale-workloads"}},
		{"k8s: resume re-arms the deadline", kHeld, "resume", PhaseProgressing, 0, 0, false, []string{"start-timer"}},
		{"k8s: retry re-arms the deadline", kHeld, "retry", PhaseProgressing, 0, 0, false, []string{"start-timer"}},
		{"k8s: promote skips a step held by its deadline", kHeld, "promote", PhasePaused, 1, 0, false, []string{"scale-workloads", "step-completed", "start-timer"}},
		{"k8s: ack of the weight starts the pause", kAwaitAck, "ack", PhasePaused, 1, 50, false, []string{"scale-workloads", "step-completed", "start-timer"}},
		{"k8s: setCanaryScale waits for its pods", kPause, "fire", PhaseProgressing, 2, 50, false, []string{"scale-workloads", "step-completed", "start-timer"}},
		{"k8s: restart re-emits pods and re-arms the deadline", kAwaitPods, "restart", PhaseProgressing, 0, 0, false, []string{"set-traffic", "scale-workloads", "start-timer"}},
		{"k8s: promote full waits for the canary at full size", kPause, "promote-full", PhaseProgressing, 5, 50, false, []string{"scale-workloads", "cancel-timer", "start-timer"}},
		{"k8s: canary at full size is promoted", kPromoWait, "pods h2 ready=2", PhaseProgressing, 5, 0, false, []string{"set-traffic", "scale-workloads", "cancel-timer"}},
		{"k8s: promotion ack starts the scale-down delay", kPromoting, "ack", PhaseHealthy, 5, 0, false, []string{"start-timer", "rollout-completed"}},
		{"k8s: scale-down delay ends the old stable", kDraining, "fire scaledown/h1", PhaseHealthy, 5, 0, false, []string{"scale-workloads"}},
		{"k8s: restart re-arms the scale-down delay", kDraining, "restart", PhaseHealthy, 5, 0, false, []string{"set-traffic", "scale-workloads", "start-timer"}},
		{"k8s: new canary while the old stable drains", kDraining, "change k3 commit=ccccccc3", PhaseProgressing, 0, 0, false, []string{"set-traffic", "scale-workloads", "rollout-started", "start-timer"}},
		{"k8s: abort moves traffic at once when stable is ready", kPause, "abort", PhaseProgressing, 1, 0, true, []string{"scale-workloads", "set-traffic", "cancel-timer", "rollout-aborted"}},
		{"k8s: abort ack starts the abort delay", kAborting, "ack", PhaseDegraded, 1, 0, true, []string{"start-timer"}},
		{"k8s: abort delay ends the canary's pods", kAborted, "fire scaledown/h2", PhaseDegraded, 1, 0, true, []string{"scale-workloads"}},
		{"k8s: rollback drains the canary", kPause, "change k1 commit=ccccccc3", PhaseProgressing, 5, 0, false, []string{"set-traffic", "scale-workloads", "cancel-timer"}},
		{"k8s: dynamic stable shrinks only on the ack", kdAwaitAck, "ack", PhasePaused, 1, 50, false, []string{"scale-workloads", "step-completed", "start-timer"}},
		{"k8s: dynamic stable abort waits for stable pods", kdPause, "abort", PhaseProgressing, 1, 50, true, []string{"scale-workloads", "cancel-timer", "start-timer", "rollout-aborted"}},
		{"k8s: stable pods back move the aborted traffic", kdAbortWaits, "pods h1 ready=2", PhaseProgressing, 1, 0, true, []string{"set-traffic", "scale-workloads", "cancel-timer"}},
		{"k8s: pods report in standalone mode ignored", pHealthy, "pods h1 ready=1", PhaseHealthy, 5, 0, false, nil},

		// Kubernetes mode with a baseline.
		{"k8s baseline: a new version starts canary and baseline together", kbHealthy, "change b2 commit=bbbbbbb2", PhaseProgressing, 0, 0, false, []string{"set-traffic", "scale-workloads", "rollout-started", "start-timer"}},
		{"k8s baseline: canary pods ready still wait for the baseline's", kbAwaitPods, "pods h2 ready=1", PhaseProgressing, 0, 0, false, []string{"cancel-timer", "start-timer"}},
		{"k8s baseline: baseline pods ready push the three-way split", kbAwaitBase, "pods b1 ready=1", PhaseProgressing, 0, 50, false, []string{"set-traffic", "scale-workloads", "cancel-timer"}},
		{"k8s baseline: abort takes canary and baseline traffic back, both drain", kbPause, "abort", PhaseProgressing, 1, 0, true, []string{"scale-workloads", "set-traffic", "cancel-timer", "rollout-aborted"}},
		{"k8s baseline: abort ack starts both delays", append(kbPause[:len(kbPause):len(kbPause)], "abort"), "ack", PhaseDegraded, 1, 0, true, []string{"start-timer", "start-timer"}},
		{"k8s baseline: the baseline's delay ends its pods", kbAbortedAcked, "fire scaledown/b1", PhaseDegraded, 1, 0, true, []string{"scale-workloads"}},
		{"k8s baseline: promotion waits for the canary only", kbPause, "promote-full", PhaseProgressing, 5, 50, false, []string{"scale-workloads", "cancel-timer", "start-timer"}},
		{"k8s baseline: promotion takes the baseline's traffic, it drains", kbPromoWait, "pods h2 ready=2", PhaseProgressing, 5, 0, false, []string{"set-traffic", "scale-workloads", "cancel-timer"}},
		{"k8s baseline: promotion ack starts the baseline's delay with the old stable's", kbPromoting, "ack", PhaseHealthy, 5, 0, false, []string{"start-timer", "start-timer", "rollout-completed"}},
		{"k8s baseline: gone after its delay", kbPromoAcked, "fire scaledown/b1", PhaseHealthy, 5, 0, false, []string{"scale-workloads"}},
		{"k8s baseline: an edit that drops the judge mid-canary keeps the baseline and its traffic", kbPause, "change b2-nojudge commit=ccccccc3 class=StrategyEdit", PhasePaused, 1, 50, false, []string{}},
		{"k8s baseline: a new canary against the same stable keeps the baseline", kbPause, "change b3 commit=ccccccc3", PhaseProgressing, 0, 0, false, []string{"set-traffic", "scale-workloads", "cancel-timer", "rollout-started", "start-timer"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, ok := runTransition(t, tt.prelude, tt.event, tt.actions == nil)
			if !ok {
				return
			}
			s, kinds, out, before := r.after, r.kinds, r.out, r.before
			if s.Phase != tt.phase || s.StepIndex != tt.step || s.Weights.Canary != tt.canary || s.Aborted != tt.aborted ||
				strings.Join(kinds, ",") != strings.Join(tt.actions, ",") {
				t.Errorf("got phase=%s step=%d canary=%d aborted=%v actions=%v\nwant phase=%s step=%d canary=%d aborted=%v actions=%v\n%s",
					s.Phase, s.StepIndex, s.Weights.Canary, s.Aborted, kinds,
					tt.phase, tt.step, tt.canary, tt.aborted, tt.actions, strings.Join(out, "\n"))
			}
			if s.Seq != before.Seq+1 {
				t.Errorf("seq %d -> %d, want +1", before.Seq, s.Seq)
			}
			if err := checkInvariants(s); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestStepIsPure checks that Step leaves its input untouched and gives the
// same answer twice, in standalone and in Kubernetes mode.
func TestStepIsPure(t *testing.T) {
	t.Run("standalone", func(t *testing.T) {
		testStepIsPure(t, pAnalysis, func(h *harness) []Event {
			return []Event{
				AnalysisResult{Run: h.state.StepRun, Phase: AnalysisFailed},
				Command{Kind: CmdPromoteFull},
				Change{Commit: "x", Rollout: h.specs["v3"]},
				Restart{},
			}
		})
	})
	t.Run("kubernetes", func(t *testing.T) {
		testStepIsPure(t, append(kdPause[:len(kdPause):len(kdPause)], "abort"), func(h *harness) []Event {
			return []Event{
				PodsReady{Hash: "h1", Replicas: 2, Ready: 2},
				TimerFired{ID: h.state.Wait.Timer.ID},
				TrafficAcked{Gen: h.state.TrafficGen},
				Command{Kind: CmdRetry},
				Change{Commit: "x", Rollout: h.specs["k3"]},
				Restart{},
			}
		})
	})
	t.Run("kubernetes drain", func(t *testing.T) {
		testStepIsPure(t, kAborting, func(h *harness) []Event {
			return []Event{
				TrafficAcked{Gen: h.state.TrafficGen},
				Command{Kind: CmdRetry},
				Change{Commit: "x", Rollout: h.specs["k3"]},
				Restart{},
			}
		})
	})
}

func testStepIsPure(t *testing.T, prelude []string, events func(*harness) []Event) {
	h := newHarness()
	for _, line := range prelude {
		if _, err := h.run(line); err != nil {
			t.Fatal(err)
		}
	}
	in := h.state
	// A snapshot that shares nothing with in, whatever clone copies.
	snapshot, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range events(h) {
		t.Run(fmt.Sprintf("%T", ev), func(t *testing.T) {
			s1, a1 := Step(in, ev)
			s2, a2 := Step(in, ev)
			if now, _ := json.Marshal(in); string(now) != string(snapshot) {
				t.Fatal("Step changed its input state")
			}
			if !reflect.DeepEqual(s1, s2) || !reflect.DeepEqual(a1, a2) {
				t.Fatal("Step is not deterministic")
			}
		})
	}
}

func TestAllows(t *testing.T) {
	tests := []struct {
		prelude []string
		allowed []CommandKind
	}{
		{pSpecs, nil},
		{pHealthy, nil},
		{pTimedPause, []CommandKind{CmdPromote, CmdPromoteFull, CmdAbort, CmdPause}},
		{pUserPaused, []CommandKind{CmdPromote, CmdPromoteFull, CmdAbort, CmdResume}},
		{pAborted, []CommandKind{CmdRetry}},
		{pPending, []CommandKind{CmdAbort, CmdApprove, CmdPause}},
		{pInconclusiv, []CommandKind{CmdPromote, CmdPromoteFull, CmdAbort, CmdRetry, CmdPause, CmdResume}},
	}
	all := []CommandKind{CmdPromote, CmdPromoteFull, CmdAbort, CmdRetry, CmdApprove, CmdPause, CmdResume}
	for i, tt := range tests {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			h := newHarness()
			for _, line := range tt.prelude {
				if _, err := h.run(line); err != nil {
					t.Fatal(err)
				}
			}
			var got []CommandKind
			for _, c := range all {
				if h.state.Allows(c) == nil {
					got = append(got, c)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.allowed) {
				t.Errorf("allowed %v, want %v", got, tt.allowed)
			}
		})
	}
}

// transitionRun is one event fed after a prelude: the state before and
// after it, the kinds of the actions it produced and the script output.
type transitionRun struct {
	before, after State
	kinds, out    []string
}

// runTransition replays prelude on a fresh harness, then feeds event. With
// wantNoChange it checks that the event changed nothing and returns ok
// false.
func runTransition(t *testing.T, prelude []string, event string, wantNoChange bool) (r transitionRun, ok bool) {
	t.Helper()
	h := newHarness()
	for _, line := range prelude {
		if _, err := h.run(line); err != nil {
			t.Fatalf("prelude %q: %v", line, err)
		}
	}
	r.before = h.state
	out, err := h.run(event)
	if err != nil {
		t.Fatal(err)
	}
	r.after, r.out = h.state, out
	if wantNoChange {
		if !reflect.DeepEqual(r.before, r.after) || len(h.acts) != 0 {
			t.Fatalf("want no change, got:\n%s", strings.Join(out, "\n"))
		}
		return r, false
	}
	for _, a := range h.acts {
		r.kinds = append(r.kinds, kindOf(a))
	}
	return r, true
}
