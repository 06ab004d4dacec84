package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group, Version and the resource, for dynamic clients and RBAC.
const (
	Group    = "sluice.io"
	Version  = "v1alpha1"
	Kind     = "SluiceRollout"
	Resource = "sluicerollouts"
)

// GroupVersionResource addresses SluiceRollouts with a dynamic client.
var GroupVersionResource = schema.GroupVersionResource{Group: Group, Version: Version, Resource: Resource}

// SluiceRollout is the state sluice keeps for one rollout when its state
// store is the cluster (--state-store kubernetes). sluice writes only the
// status; the spec is empty (the strategy lives in git).
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=sro,categories=sluice
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Step",type=integer,JSONPath=`.status.stepIndex`
// +kubebuilder:printcolumn:name="Stable Weight",type=integer,JSONPath=`.status.stableWeight`
// +kubebuilder:printcolumn:name="Canary Weight",type=integer,JSONPath=`.status.canaryWeight`
// +kubebuilder:printcolumn:name="Stable Version",type=string,JSONPath=`.status.stableVersion`
// +kubebuilder:printcolumn:name="Canary Version",type=string,JSONPath=`.status.canaryVersion`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type SluiceRollout struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   SluiceRolloutSpec   `json:"spec,omitempty"`
	Status SluiceRolloutStatus `json:"status,omitempty"`
}

// SluiceRolloutSpec is empty: what to roll out is read from git.
type SluiceRolloutSpec struct{}

// SluiceRolloutStatus is the runner's record and a summary of it for
// people (kubectl get sluicerollouts -A).
type SluiceRolloutStatus struct {
	// Record is the runner's versioned record of the rollout (state,
	// pending alerts, timer deadlines), as the runner encodes it.
	Record []byte `json:"record,omitempty"`
	// Writer is the identity of the sluice replica that wrote Record.
	Writer string `json:"writer,omitempty"`
	// LeaderEpoch is the leader term (the Lease's leaderTransitions when
	// the writer became leader) of the write: a writer that meets a
	// higher epoch on a conflict has been replaced and stops.
	LeaderEpoch int32 `json:"leaderEpoch,omitempty"`

	Phase         string `json:"phase,omitempty"`
	StepIndex     int32  `json:"stepIndex,omitempty"`
	StableWeight  int32  `json:"stableWeight,omitempty"`
	CanaryWeight  int32  `json:"canaryWeight,omitempty"`
	StableVersion string `json:"stableVersion,omitempty"`
	CanaryVersion string `json:"canaryVersion,omitempty"`
}

// SluiceRolloutList is a list of SluiceRollouts.
//
// +kubebuilder:object:root=true
type SluiceRolloutList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []SluiceRollout `json:"items"`
}
