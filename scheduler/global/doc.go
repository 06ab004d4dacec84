// Package global is the cluster layer of sluice's layered scheduler (seed
// 004, chapter 2): for a rollout that spans clusters it chooses the
// clusters and orders them into waves, with the graph scheduler's plugin
// framework one layer up (framework.go): filter plugins choose (the
// rollout's label selector over cluster labels), score plugins rank
// (reachable clusters first, then the fewest stable pods, then the lowest
// request share: the smallest blast radius first). Later waves spread
// across regions, so that no wave takes the whole of a region before
// every other region has had a cluster pass. Each decision comes with the
// reason the status shows. The package is pure: cluster facts come in, a
// plan comes out; the graph scheduler (package scheduler) places pods
// within a cluster and scheduler/kube binds them.
//
// Expand turns a set's multi-cluster rollouts into their parts, one per
// cluster ("ns/name@cluster"), each seated in its wave; the state
// machine's wave program (controller/rollout, waves.go) runs them.
package global
