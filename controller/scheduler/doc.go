// Package scheduler places canary (and baseline) pods on a cluster described
// as a topology graph: regions → zones → racks (any ordered list of topology
// label keys) → nodes.
//
// It owns three things:
//
//   - Graph: the compact cluster model. Nodes are value structs in one slice
//     indexed by int32 IDs, label keys and values are interned, each topology
//     domain is a contiguous index range of a topology-ordered node list, and
//     pod counts per group/service are kept per domain, so filters and scores
//     read arrays, never per-node maps. Node and pod changes are applied
//     incrementally.
//   - A plugin framework in the style of kube-scheduler: one small interface
//     per extension point (PreFilter, Filter, PostFilter, PreScore, Score,
//     NormalizeScore, Reserve/Unreserve, Bind), a *Status where nil means
//     success, and a Registry passed in explicitly.
//   - Scheduler: a bounded input queue and the scheduling cycle, which samples
//     nodes adaptively (percentageOfNodesToScore), filters and scores them in
//     parallel on a bounded set of goroutines, breaks ties with a seeded
//     random source (so a fixed seed gives a fixed result), and reserves the
//     chosen node.
//
// Pods and nodes are plain structs (Pod, Node) that a Kubernetes layer can
// fill from corev1.Pod and corev1.Node; this package imports no Kubernetes
// client code.
package scheduler
