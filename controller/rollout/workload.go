package rollout

import "github.com/sluice-dev/sluice/api"

// WorkloadRole says which side of a rollout a set of pods serves.
type WorkloadRole string

// Workload roles.
const (
	RoleStable WorkloadRole = "stable"
	RoleCanary WorkloadRole = "canary"
	// RoleOld is a former stable or aborted canary still draining: it
	// keeps its pods until its scale-down delay has passed.
	RoleOld WorkloadRole = "old"
)

// WorkloadSet is one version's pods as the machine wants them.
type WorkloadSet struct {
	Role    WorkloadRole `json:"role"`
	Version string       `json:"version"`
	// Hash is the version's pod-template hash: its ReplicaSet is
	// "<rollout>-<hash>".
	Hash     string `json:"hash"`
	Replicas int32  `json:"replicas"`
	// Spec is the rollout whose template builds this version's pods.
	Spec *api.Rollout `json:"spec"`
	// At is where the canary stands, on the canary's set only: the
	// actuator writes it on the ReplicaSet, and after a state loss it
	// tells how far the canary had got (recover.go).
	At *Position `json:"at,omitempty"`
	// Aborted marks the set of a canary an operator or an analysis
	// aborted: the actuator writes it on the ReplicaSet before the traffic
	// moves back, so that a state lost meanwhile is recovered as aborted,
	// never as a canary to resume. A retry or a new version leaves it out
	// again, which clears it.
	Aborted bool `json:"aborted,omitempty"`
	// Experiment is the template an experiment set runs (RoleExperiment):
	// Spec's pod template with its labels and annotations, under its own
	// ReplicaSet name (api.ExperimentReplicaSetName).
	Experiment *api.ExperimentTemplate `json:"experiment,omitempty"`
}

// Position is a canary's step index and the canary weight of its traffic.
type Position struct {
	Step   int32 `json:"step"`
	Weight int32 `json:"weight"`
}

// ScaleWorkloads (Kubernetes mode) asks the workload actuator to run
// exactly Sets for Rollout: every ReplicaSet of the rollout not named in
// Sets goes to 0 replicas (and out of the revision history past its
// limit). It is declarative, so executing it twice does no harm.
// Readiness comes back as PodsReady events: once the actuator has applied
// a ScaleWorkloads it reports every set in it (even unchanged), then
// every change; the machine forgets the report of a set it scales to 0,
// so a set that comes back waits for a fresh report.
type ScaleWorkloads struct {
	Rollout api.Key       `json:"rollout"`
	Gen     uint64        `json:"gen"`
	Sets    []WorkloadSet `json:"sets"`
	// Ahead asks the actuator to apply the sets before it carries out the
	// actions after this one (an abort's mark must be in the cluster
	// before the traffic moves back), rather than in the background.
	Ahead bool `json:"ahead,omitempty"`
}

func (ScaleWorkloads) isAction() {}

// PodsReady (Kubernetes mode) reports the pods of one version of the
// rollout, by pod-template hash: how many exist and how many are Ready.
// The actuator sends it whenever either number changes.
type PodsReady struct {
	Hash     string `json:"hash"`
	Replicas int32  `json:"replicas"`
	Ready    int32  `json:"ready"`
}

func (PodsReady) isEvent() {}
