// Package global is the cluster layer of sluice's layered scheduler (seed
// 004, chapter 2): for a rollout that spans clusters it chooses the
// clusters (a label selector over cluster labels) and orders them into
// waves. The first wave is the cluster with the smallest blast radius;
// later waves spread across regions, so that no wave takes the whole of a
// region before every other region has had a cluster pass. Each decision
// comes with the reason the status shows. The package is pure: cluster
// facts come in, a plan comes out; the graph scheduler (package scheduler)
// places pods within a cluster and scheduler/kube binds them.
//
// Issue 30 builds the rest of multi-cluster on it (cluster clients, the
// wave program in the state machine, per-cluster actuators); today
// nothing outside the package uses it.
package global
