package kubestore

// The CRD shipped in the chart and the deepcopy methods come from the
// v1alpha1 types; TestCRDUpToDate fails when they drift.
//go:generate go tool controller-gen object crd paths=./v1alpha1/... output:crd:dir=../../../charts/sluice/crds
