package rollout

import (
	"fmt"
	"time"

	"github.com/sluice-dev/sluice/api"
)

// This file runs experiment steps (api.Experiment, Kubernetes mode), with
// Argo Rollouts' experiment lifecycle: entering the step starts one
// ReplicaSet per template (a WorkloadSet of RoleExperiment in the next
// ScaleWorkloads) and arms the progress deadline; once every template's
// pods are Ready the experiment is available: its analyses start and its
// duration runs. The step is done when every analysis required for
// completion has succeeded or, with none required, when the duration has
// passed; a failed or errored analysis aborts the rollout, an inconclusive
// one holds it. Whenever the step ends (done, promote, abort, a new
// version) its runs stop and its sets leave the desired sets, which
// deletes their ReplicaSets. Experiment pods get no traffic.

// RoleExperiment is an experiment template's WorkloadSet.
const RoleExperiment WorkloadRole = "experiment"

// RunExperiment is the kind of an experiment's analysis runs.
const RunExperiment RunKind = "experiment"

// ExperimentRun is the experiment of the current step while it runs.
type ExperimentRun struct {
	Step int32           `json:"step"`
	Sets []ExperimentSet `json:"sets"`
	// Available is set once every set's pods were Ready: the analyses
	// and the duration start then (Argo's availableAt).
	Available bool `json:"available,omitempty"`
	// Elapsed is set when the duration has passed since Available.
	Elapsed bool `json:"elapsed,omitempty"`
	// Runs are the experiment's analysis runs, one per analysis.
	Runs []ExperimentAnalysisRun `json:"runs,omitempty"`
}

// ExperimentSet is one template of the experiment: the version whose pod
// template it runs and its own pod-template hash (api.ExperimentHash).
type ExperimentSet struct {
	Template api.ExperimentTemplate `json:"template"`
	Version  string                 `json:"version"`
	Hash     string                 `json:"hash"`
}

// ExperimentAnalysisRun names the run of one analysis of the experiment.
type ExperimentAnalysisRun struct {
	Analysis string `json:"analysis"`
	Run      string `json:"run"`
	Required bool   `json:"required,omitempty"`
}

func (x *ExperimentRun) clone() *ExperimentRun {
	if x == nil {
		return nil
	}
	c := *x
	c.Sets = cloneSlice(x.Sets)
	c.Runs = cloneSlice(x.Runs)
	return &c
}

// experimentRun reports whether run is an analysis run of the running
// experiment.
func (s State) experimentRun(run string) bool {
	if s.Experiment == nil || run == "" {
		return false
	}
	for _, r := range s.Experiment.Runs {
		if r.Run == run {
			return true
		}
	}
	return false
}

// experimentSpec is the rollout whose pod template a template of specRef
// runs, and its version.
func (s State) experimentSpec(ref api.SpecRef) (*api.Rollout, string) {
	if ref == api.SpecRefStable {
		return s.stableSpecOrSpec(), s.StableVersion
	}
	return s.Spec, s.CanaryVersion
}

// experimentSets are the desired sets of the running experiment.
func (s State) experimentSets() []WorkloadSet {
	if s.Experiment == nil {
		return nil
	}
	var out []WorkloadSet
	for _, e := range s.Experiment.Sets {
		spec, _ := s.experimentSpec(e.Template.SpecRef)
		t := e.Template
		out = append(out, WorkloadSet{Role: RoleExperiment, Version: e.Version, Hash: e.Hash, Replicas: t.Replicas, Spec: spec, Experiment: &t})
	}
	return out
}

// startExperiment enters the experiment's window: its sets go into the
// ScaleWorkloads of this Step and the progress deadline starts. In
// standalone mode (which refuses experiment steps at load) there is
// nothing to run and the step is done.
func (m *machine) startExperiment(e *api.Experiment) {
	if e == nil || !m.s.kubernetes() {
		m.s.Cursor = CursorDone
		return
	}
	m.s.Cursor = CursorRunning
	x := &ExperimentRun{Step: m.s.StepIndex}
	for _, t := range e.Templates {
		spec, version := m.s.experimentSpec(t.SpecRef)
		x.Sets = append(x.Sets, ExperimentSet{Template: t, Version: version, Hash: api.ExperimentHash(spec, t)})
	}
	m.s.Experiment = x
	m.armStepTimer("experiment-deadline", m.s.workload().ProgressDeadline)
	m.experimentProgress()
}

// armStepTimer arms the step's one timer (State.Timer).
func (m *machine) armStepTimer(kind string, d time.Duration) {
	t := Timer{ID: fmt.Sprintf("%s/%d/%d", kind, m.s.StepIndex, m.s.Seq+1), Duration: d}
	m.s.Timer = &t
	m.emit(StartTimer{Timer: t})
}

// cancelStepTimer disarms the step's timer, if armed.
func (m *machine) cancelStepTimer() {
	if m.s.Timer != nil {
		m.emit(CancelTimer{ID: m.s.Timer.ID})
		m.s.Timer = nil
	}
}

// experimentProgress moves the running experiment on as far as it can:
// available once its pods are Ready (analyses and duration start), done
// once complete.
func (m *machine) experimentProgress() {
	x := m.s.Experiment
	st, ok := m.currentStep()
	if x == nil || !ok || st.Experiment == nil || !m.s.CanaryActive() || m.s.Cursor != CursorRunning {
		return
	}
	if !x.Available {
		if !m.s.experimentReady() {
			return
		}
		x.Available = true
		m.cancelStepTimer()
		m.startExperimentRuns(st.Experiment)
		if st.Experiment.Duration > 0 {
			m.armStepTimer("experiment", st.Experiment.Duration)
		}
	}
	// A hold (an operator pause) does not keep a complete experiment
	// running: the step is done and waits, as a pause step's timer does.
	if !m.s.experimentComplete(st.Experiment) {
		return
	}
	m.cancelStepTimer()
	m.stopExperiment()
	m.s.Cursor = CursorDone
	m.advance()
}

// experimentReady reports whether every set of the experiment runs its
// pods, all Ready.
func (s State) experimentReady() bool {
	for _, e := range s.Experiment.Sets {
		if s.pods(e.Hash).Ready < e.Template.Replicas {
			return false
		}
	}
	return true
}

// experimentComplete: with analyses required for completion, when they
// all succeeded (before the duration is over, as in Argo); without, when
// the duration has passed (never without a duration: it runs until
// promoted).
func (s State) experimentComplete(e *api.Experiment) bool {
	x := s.Experiment
	if !x.Available {
		return false
	}
	if !e.Required() {
		return x.Elapsed
	}
	for _, r := range x.Runs {
		if run := s.run(r.Run); r.Required && (run == nil || run.Phase != AnalysisSuccessful) {
			return false
		}
	}
	return true
}

// startExperimentRuns starts one run per analysis, with the built-in
// arguments and Argo's {{templates.<name>.podTemplateHash}} and
// {{templates.<name>.replicaset.name}} resolved in the given ones.
func (m *machine) startExperimentRuns(e *api.Experiment) {
	x := m.s.Experiment
	hashes := map[string]string{}
	for _, set := range x.Sets {
		hashes[set.Template.Name] = set.Hash
	}
	for _, a := range e.Analyses {
		an := a.Analysis
		an.Args = m.s.podTemplateHashArgs(api.ResolveExperimentArgs(an.Args, m.s.Key.Name, hashes))
		run := m.startRun(RunExperiment, an)
		x.Runs = append(x.Runs, ExperimentAnalysisRun{Analysis: a.Name, Run: run, Required: a.RequiredForCompletion})
	}
}

// podTemplateHashArgs fills the arguments given as valueFrom
// podTemplateHashValue (Stable or Latest) with the stable's and the
// canary's pod-template hashes, as Argo's
// BuildArgumentsForRolloutAnalysisRun does for an experiment's analyses.
func (s State) podTemplateHashArgs(args []api.Arg) []api.Arg {
	out := cloneSlice(args)
	for i, a := range out {
		switch a.ValueFrom {
		case "podTemplateHashValue:Stable":
			out[i].Value, out[i].ValueFrom = s.StableHash, ""
		case "podTemplateHashValue:Latest":
			out[i].Value, out[i].ValueFrom = s.CanaryHash, ""
		}
	}
	return out
}

// experimentTimer acts on the step's timer: before the pods are Ready it
// is the progress deadline, and the experiment fails (Argo fails an
// experiment whose ReplicaSets make no progress, which aborts the
// rollout); after, it is the duration.
func (m *machine) experimentTimer() {
	x := m.s.Experiment
	if x == nil {
		return
	}
	if !x.Available {
		m.abort(fmt.Sprintf("experiment of step %d: pods not Ready within the progress deadline (%s)", m.s.StepIndex+1, m.s.workload().ProgressDeadline))
		return
	}
	x.Elapsed = true
	m.experimentProgress()
}

// restartExperimentRuns runs the experiment's analyses again after an
// inconclusive one (resume or retry): verification is never skipped.
func (m *machine) restartExperimentRuns() {
	x := m.s.Experiment
	for _, r := range x.Runs {
		m.stopRun(r.Run)
	}
	m.cancelStepTimer()
	x.Runs, x.Available, x.Elapsed = nil, false, false
	m.experimentProgress()
}

// stopExperiment stops the experiment's runs; its sets leave the desired
// sets, so the next ScaleWorkloads deletes their ReplicaSets.
func (m *machine) stopExperiment() {
	x := m.s.Experiment
	if x == nil {
		return
	}
	for _, r := range x.Runs {
		m.stopRun(r.Run)
	}
	m.s.Experiment = nil
}

// experimentRunNames are the runs of the running experiment.
func (s State) experimentRunNames() []string {
	if s.Experiment == nil {
		return nil
	}
	var out []string
	for _, r := range s.Experiment.Runs {
		out = append(out, r.Run)
	}
	return out
}
