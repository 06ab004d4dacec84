package rollout

import (
	"reflect"
	"strings"
	"testing"

	"github.com/sluice-dev/sluice/api"
)

// Experiment preludes (Kubernetes mode, 2 replicas): setWeight 20; an
// experiment of two templates, "base" of the stable version and "cand" of
// the canary, for 10s, with analysis "cmp" required for completion and
// "other" not; setWeight 50.
var (
	eSteps = `steps="setWeight 20; experiment base:stable,cand:canary 10s cmp=check! other=check2; setWeight 50"`
	eSpecs = []string{
		`spec e1 version=v1 hash=h1 replicas=2 ` + eSteps,
		`spec e2 version=v2 hash=h2 replicas=2 ` + eSteps,
		`spec e3 version=v3 hash=h3 replicas=2 ` + eSteps,
		`spec e2-duration version=v2 hash=h2 replicas=2 steps="setWeight 20; experiment base:stable,cand:canary 10s other=check2; setWeight 50"`,
		`spec e2-open version=v2 hash=h2 replicas=2 steps="setWeight 20; experiment cand:canary; setWeight 50"`,
	}
	eHealthy      = append(eSpecs[:len(eSpecs):len(eSpecs)], "change e1 commit=aaaaaaa1", "pods h1 ready=2", "ack")
	eEnter        = append(eHealthy[:len(eHealthy):len(eHealthy)], "change e2 commit=bbbbbbb2", "pods h2 ready=1")
	ePending      = append(eEnter[:len(eEnter):len(eEnter)], "ack")
	eHalfReady    = append(ePending[:len(ePending):len(ePending)], "pods exp:base ready=1")
	eRunning      = append(eHalfReady[:len(eHalfReady):len(eHalfReady)], "pods exp:cand ready=1")
	eInconclusive = append(eRunning[:len(eRunning):len(eRunning)], "result run=exp:cmp phase=Inconclusive")
	eDuration     = append(eHealthy[:len(eHealthy):len(eHealthy)], "change e2-duration commit=bbbbbbb2", "pods h2 ready=1", "ack",
		"pods exp:base ready=1", "pods exp:cand ready=1")
	eOpen = append(eHealthy[:len(eHealthy):len(eHealthy)], "change e2-open commit=bbbbbbb2", "pods h2 ready=1", "ack")
)

// experimentSets counts the experiment sets the machine wants.
func experimentSets(s State) int {
	n := 0
	for _, w := range s.desiredSets() {
		if w.Role == RoleExperiment {
			n++
		}
	}
	return n
}

// TestExperimentTransitions covers the experiment step's rows of
// TRANSITIONS.md: the phase, step, canary weight, the actions in order
// and how many experiment ReplicaSets the machine wants afterwards.
func TestExperimentTransitions(t *testing.T) {
	tests := []struct {
		name    string
		prelude []string
		event   string
		phase   Phase
		step    int32
		canary  int32
		aborted bool
		sets    int
		actions []string // nil: the event changes nothing at all
	}{
		{"entering starts the sets and the progress deadline", eEnter, "ack", PhaseProgressing, 1, 20, false, 2,
			[]string{"scale-workloads", "step-completed", "start-timer"}},
		{"one template Ready is not enough", ePending, "pods exp:base ready=1", PhaseProgressing, 1, 20, false, 2, []string{}},
		{"all Ready: the analyses and the duration start", eHalfReady, "pods exp:cand ready=1", PhaseProgressing, 1, 20, false, 2,
			[]string{"cancel-timer", "start-analysis:experiment", "start-analysis:experiment", "start-timer"}},
		{"the duration alone does not complete it while a required analysis runs", eRunning, "fire", PhaseProgressing, 1, 20, false, 2, []string{}},
		{"the required analysis succeeding completes it, the others stop, the sets go", eRunning, "result run=exp:cmp phase=Successful", PhaseProgressing, 2, 50, false, 0,
			[]string{"set-traffic", "scale-workloads", "cancel-timer", "stop-analysis", "step-completed"}},
		{"an analysis not required succeeding changes nothing else", eRunning, "result run=exp:other phase=Successful", PhaseProgressing, 1, 20, false, 2, []string{}},
		{"a failed analysis aborts, the sets go with the abort's mark", eRunning, "result run=exp:other phase=Failed", PhaseProgressing, 1, 0, true, 0,
			[]string{"scale-workloads", "set-traffic", "analysis-failed", "cancel-timer", "stop-analysis", "rollout-aborted"}},
		{"an errored analysis aborts", eRunning, "result run=exp:cmp phase=Error", PhaseProgressing, 1, 0, true, 0,
			[]string{"scale-workloads", "set-traffic", "analysis-error", "cancel-timer", "stop-analysis", "rollout-aborted"}},
		{"an inconclusive analysis holds, the sets stay", eRunning, "result run=exp:cmp phase=Inconclusive", PhasePaused, 1, 20, false, 2, []string{"rollout-paused"}},
		{"resume after inconclusive runs the analyses again", eInconclusive, "resume", PhaseProgressing, 1, 20, false, 2,
			[]string{"stop-analysis", "cancel-timer", "start-analysis:experiment", "start-analysis:experiment", "start-timer"}},
		{"pods not Ready by the progress deadline abort", ePending, "fire", PhaseProgressing, 1, 0, true, 0,
			[]string{"scale-workloads", "set-traffic", "rollout-aborted"}},
		{"promote ends the experiment", eRunning, "promote", PhaseProgressing, 2, 50, false, 0,
			[]string{"set-traffic", "scale-workloads", "cancel-timer", "stop-analysis", "stop-analysis", "step-completed"}},
		{"abort ends the experiment", eRunning, "abort", PhaseProgressing, 1, 0, true, 0,
			[]string{"scale-workloads", "set-traffic", "cancel-timer", "stop-analysis", "stop-analysis", "rollout-aborted"}},
		{"a new version ends the experiment", eRunning, "change e3 commit=ccccccc3", PhaseProgressing, 0, 0, false, 0,
			[]string{"set-traffic", "scale-workloads", "cancel-timer", "stop-analysis", "stop-analysis", "rollout-started", "start-timer"}},
		{"restart re-sends the sets, the timer and the runs", eRunning, "restart", PhaseProgressing, 1, 20, false, 2,
			[]string{"set-traffic", "scale-workloads", "start-timer", "start-analysis:experiment", "start-analysis:experiment"}},
		{"paused by the operator: the required analysis still completes the step, which then waits", append(eRunning[:len(eRunning):len(eRunning)], "pause"),
			"result run=exp:cmp phase=Successful", PhasePaused, 1, 20, false, 0, []string{"scale-workloads", "cancel-timer", "stop-analysis"}},
		{"resume after a pause goes on from the completed experiment", append(eRunning[:len(eRunning):len(eRunning)], "pause", "result run=exp:cmp phase=Successful"),
			"resume", PhaseProgressing, 2, 50, false, 0, []string{"set-traffic", "scale-workloads", "step-completed"}},
		{"without a required analysis the duration completes it", eDuration, "fire", PhaseProgressing, 2, 50, false, 0,
			[]string{"set-traffic", "scale-workloads", "stop-analysis", "step-completed"}},
		{"without duration or required analysis it runs until promoted", eOpen, "pods exp:cand ready=1", PhaseProgressing, 1, 20, false, 1,
			[]string{"cancel-timer"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, ok := runTransition(t, tt.prelude, tt.event, tt.actions == nil)
			if !ok {
				return
			}
			s, kinds, out := r.after, r.kinds, r.out
			if s.Phase != tt.phase || s.StepIndex != tt.step || s.Weights.Canary != tt.canary || s.Aborted != tt.aborted ||
				experimentSets(s) != tt.sets || strings.Join(kinds, ",") != strings.Join(tt.actions, ",") {
				t.Errorf("got phase=%s step=%d canary=%d aborted=%v sets=%d actions=%v\nwant phase=%s step=%d canary=%d aborted=%v sets=%d actions=%v\n%s",
					s.Phase, s.StepIndex, s.Weights.Canary, s.Aborted, experimentSets(s), kinds,
					tt.phase, tt.step, tt.canary, tt.aborted, tt.sets, tt.actions, strings.Join(out, "\n"))
			}
			if err := checkInvariants(s); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestExperimentArgs: an experiment's analyses get Argo's placeholders
// and valueFrom podTemplateHashValue resolved to pod-template hashes.
func TestExperimentArgs(t *testing.T) {
	h := newHarness()
	for _, line := range eHalfReady {
		if _, err := h.run(line); err != nil {
			t.Fatalf("prelude %q: %v", line, err)
		}
	}
	step := h.specs["e2"].Steps[1].Experiment
	step.Analyses[0].Analysis.Args = []api.Arg{
		{Name: "base", Value: "{{templates.base.podTemplateHash}}"},
		{Name: "rs", Value: "{{templates.cand.replicaset.name}}"},
		{Name: "stable", ValueFrom: "podTemplateHashValue:Stable"},
		{Name: "latest", ValueFrom: "podTemplateHashValue:Latest"},
	}
	if _, err := h.run("pods exp:cand ready=1"); err != nil {
		t.Fatal(err)
	}
	var got []api.Arg
	for _, a := range h.acts {
		if sa, ok := a.(StartAnalysis); ok && sa.Kind == RunExperiment && len(got) == 0 {
			got = sa.Analysis.Args
		}
	}
	x := h.state.Experiment
	want := []api.Arg{
		{Name: "base", Value: x.Sets[0].Hash},
		{Name: "rs", Value: "checkout-cand-" + x.Sets[1].Hash},
		{Name: "stable", Value: "h1"},
		{Name: "latest", Value: "h2"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("args %+v, want %+v", got, want)
	}
}
