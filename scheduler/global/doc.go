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
// Expand turns a set's multi-cluster rollouts into their parts, one per
// cluster ("ns/name@cluster"), each seated in its wave; the state
// machine's wave program (controller/rollout, waves.go) runs them.
package global
