// Package v1alpha1 holds the Go types of sluice's custom resource,
// SluiceRollout (group sluice.io): one object per rollout, in the
// rollout's namespace and with its name, whose status carries the record
// the runner persists. The CRD in charts/sluice/crds is generated from
// these types by controller-gen (go generate ./controller/store/kubestore/...).
//
// +kubebuilder:object:generate=true
// +groupName=sluice.io
package v1alpha1
