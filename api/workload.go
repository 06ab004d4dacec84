package api

import "time"

// Defaults of Workload, as Argo Rollouts defines them.
const (
	DefaultProgressDeadline     = 600 * time.Second
	DefaultScaleDownDelay       = 30 * time.Second
	DefaultAbortScaleDownDelay  = 30 * time.Second
	DefaultRevisionHistoryLimit = 10
	DefaultMinPodsPerReplicaSet = 1
)

// Workload is what Kubernetes mode needs to run a rollout's pods; it is
// nil in standalone mode, where pods are not sluice's business. The pod
// template and selector themselves stay in Rollout.Spec (Argo's types).
type Workload struct {
	// PodTemplateHash is Argo's hash of spec.template
	// (utils/hash.ComputePodTemplateHash): it names the version's
	// ReplicaSet "<rollout>-<hash>" and labels its pods.
	PodTemplateHash string `json:"podTemplateHash"`
	// DynamicStableScale shrinks stable as traffic leaves it, only after
	// the ACK of the weight that moved the traffic.
	DynamicStableScale bool `json:"dynamicStableScale,omitempty"`
	// MinPodsPerReplicaSet is the fewest pods a side that gets traffic runs.
	MinPodsPerReplicaSet int32 `json:"minPodsPerReplicaSet"`
	// ProgressDeadline bounds a wait for Ready pods; past it the rollout
	// aborts (ProgressDeadlineAbort) or pauses with the reason.
	ProgressDeadline      time.Duration `json:"progressDeadline"`
	ProgressDeadlineAbort bool          `json:"progressDeadlineAbort,omitempty"`
	// ScaleDownDelay is how long the old stable keeps its pods after the
	// ACK of a promotion; AbortScaleDownDelay is the same for the canary
	// after the ACK of an abort.
	ScaleDownDelay      time.Duration `json:"scaleDownDelay"`
	AbortScaleDownDelay time.Duration `json:"abortScaleDownDelay"`
	// RevisionHistoryLimit old ReplicaSets are kept at 0 replicas.
	RevisionHistoryLimit int32 `json:"revisionHistoryLimit"`
	// CanaryService and StableService are the Services whose selectors
	// sluice pins to each side's pod-template hash ("" when not named).
	CanaryService string `json:"canaryService,omitempty"`
	StableService string `json:"stableService,omitempty"`
}
