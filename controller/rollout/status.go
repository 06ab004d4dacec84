package rollout

import (
	"github.com/sluice-dev/sluice/api"
)

// Status is RolloutStatus of the HTTP API; its JSON field names are a
// contract (DESIGN §5). Slices are never nil, so they encode as [].
type Status struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Strategy is "blueGreen" for a blue-green rollout, empty for a
	// canary.
	Strategy      api.Strategy      `json:"strategy,omitempty"`
	Phase         Phase             `json:"phase"`
	Message       string            `json:"message"`
	Commit        string            `json:"commit"`
	StableVersion string            `json:"stableVersion"`
	CanaryVersion string            `json:"canaryVersion"`
	StepIndex     int32             `json:"stepIndex"`
	StepCount     int32             `json:"stepCount"`
	Weights       api.Weights       `json:"weights"`
	HeaderRoutes  []api.HeaderRoute `json:"headerRoutes"`
	AnalysisRuns  []RunStatus       `json:"analysisRuns"`
	Aborted       bool              `json:"aborted"`
	Errors        []ErrorStatus     `json:"errors"`
	// ReplicaSets are the rollout's ReplicaSets in the cluster, newest
	// first (Kubernetes mode only). The state does not hold them: the
	// daemon adds them from the cluster when it serves the status.
	ReplicaSets []ReplicaSetStatus `json:"replicaSets,omitempty"`
	// Writeback is what sluice wrote back to git (--git-writeback). The
	// state does not hold it either: the daemon adds it.
	Writeback *WritebackStatus `json:"writeback,omitempty"`
	// Steps is the timeline of the spec in force (timeline.go).
	Steps []StepStatus `json:"steps"`
	// MirrorRoutes are the mirror routes in force, in step order.
	MirrorRoutes []api.MirrorRoute `json:"mirrorRoutes"`
	// Traffic says whether the clients ACKed the declared weights.
	Traffic TrafficStatus `json:"traffic"`
	// CreatedAt is when sluice first saw the rollout, PhaseSince when its
	// current phase began: RFC 3339 times in UTC, "" when unknown (a
	// record stored before they were kept). The state does not hold them:
	// the runner stamps them beside the state it stores.
	CreatedAt  string `json:"createdAt,omitempty"`
	PhaseSince string `json:"phaseSince,omitempty"`
	// Queued is set while a new canary waits for a canary slot
	// (--max-concurrent-canaries); see WithQueuePosition.
	Queued *QueueStatus `json:"queued,omitempty"`
	// Wave is the part's place in a multi-cluster rollout (waves.go).
	Wave *WaveStatus `json:"wave,omitempty"`
	// Experiment is the current step's experiment while it runs
	// (Kubernetes mode; experiment_status.go).
	Experiment *ExperimentStatus `json:"experiment,omitempty"`
}

// WritebackStatus is what sluice wrote back to git for a rollout
// (--git-writeback): the revert and the commit status, or why not.
type WritebackStatus struct {
	// Revert is the last revert's outcome ("" for none yet): reverted,
	// already-stable, superseded, not-found, failed, or retrying.
	Revert string `json:"revert,omitempty"`
	// RevertCommit and RevertBranch say where the revert went.
	RevertCommit string `json:"revertCommit,omitempty"`
	RevertBranch string `json:"revertBranch,omitempty"`
	// PullRequest is the URL of the pull request opened for the revert.
	PullRequest string `json:"pullRequest,omitempty"`
	// Message explains the outcome, or why nothing was written.
	Message string `json:"message,omitempty"`
	// Status is the last commit status posted (pending, success,
	// failure), StatusCommit its commit, StatusError why it failed.
	Status       string `json:"status,omitempty"`
	StatusCommit string `json:"statusCommit,omitempty"`
	StatusError  string `json:"statusError,omitempty"`
}

// ReplicaSetStatus is one ReplicaSet of a rollout, as `kubectl argo
// rollouts get` shows it: its version and role, desired and Ready pods,
// the zones its Ready pods run in, and why pods wait to be placed.
type ReplicaSetStatus struct {
	Name    string `json:"name"`
	Hash    string `json:"hash"`
	Version string `json:"version"`
	// Role is stable, canary, old (draining) or inactive (history).
	Role     string `json:"role"`
	Revision int64  `json:"revision"`
	Desired  int32  `json:"desired"`
	Replicas int32  `json:"replicas"`
	Ready    int32  `json:"ready"`
	// Zones counts Ready pods per zone of their node (pods on nodes without
	// a zone label are not counted).
	Zones map[string]int `json:"zones,omitempty"`
	// Pending counts its pods not placed on a node yet; Unschedulable is
	// the scheduler's reason for the first of them, once it has one.
	Pending       int    `json:"pending,omitempty"`
	Unschedulable string `json:"unschedulable,omitempty"`
}

// RunStatus is one analysis run in Status.
type RunStatus struct {
	Name    string         `json:"name"`
	Phase   AnalysisPhase  `json:"phase"`
	Metrics []MetricStatus `json:"metrics"`
	// Message is the verdict's explanation once the run has one.
	Message string `json:"message"`
}

// ErrorStatus is one load error in Status.
type ErrorStatus struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Status converts the state into the API's RolloutStatus.
func (s State) Status() Status {
	st := Status{
		Namespace:     s.Key.Namespace,
		Name:          s.Key.Name,
		Strategy:      s.strategy(),
		Phase:         s.Phase,
		Message:       s.Message,
		Commit:        s.Commit,
		StableVersion: s.StableVersion,
		CanaryVersion: s.CanaryVersion,
		StepIndex:     s.StepIndex,
		StepCount:     s.StepCount(),
		Weights:       s.routedWeights(),
		HeaderRoutes:  append([]api.HeaderRoute{}, s.HeaderRoutes...),
		AnalysisRuns:  []RunStatus{},
		Aborted:       s.Aborted,
		Errors:        []ErrorStatus{},
		Steps:         s.timeline(),
		MirrorRoutes:  mirrorRoutes(s.MirrorRoutes),
		Traffic:       s.trafficStatus(),
		Queued:        queueStatus(s.Queued),
		Experiment:    s.experimentStatus(),
		Wave:          s.waveStatus(),
	}
	runs := s.Runs
	if len(runs) > maxFinishedRuns {
		runs = runs[len(runs)-maxFinishedRuns:]
	}
	for _, r := range runs {
		st.AnalysisRuns = append(st.AnalysisRuns, RunStatus{Name: r.Name, Phase: r.Phase, Metrics: append([]MetricStatus{}, r.Metrics...), Message: r.Message})
	}
	for _, d := range s.Errors {
		st.Errors = append(st.Errors, ErrorStatus{File: d.File, Line: d.Line, Field: d.Field, Message: d.Message})
	}
	return st
}

// strategy is the spec's strategy ("" without a spec).
func (s State) strategy() api.Strategy {
	if s.Spec == nil {
		return ""
	}
	return s.Spec.Strategy
}

// Gauges are what /metrics exports of a rollout. They are read for every
// rollout at every scrape, so they come straight from the state: building
// each Status for them (its timeline, runs and routes) made reading 1,000
// rollouts 11 times slower (2.0 ms against 0.18 ms, with the runner's
// lock held) and allocated 733 KB instead of 64 KB (runner's
// BenchmarkMetricsRead).
type Gauges struct {
	Key       api.Key
	Phase     Phase
	Weights   api.Weights
	StepIndex int32
}

// Gauges are the values Status would give for the same fields.
func (s *State) Gauges() Gauges {
	return Gauges{Key: s.Key, Phase: s.Phase, Weights: s.routedWeights(), StepIndex: s.StepIndex}
}
