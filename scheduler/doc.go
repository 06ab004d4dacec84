// Package scheduler places canary (and baseline) pods on a cluster described
// as a topology graph: regions → zones → racks (any ordered list of up to
// MaxTopologyLevels node label keys) → nodes.
//
// It owns three things:
//
//   - Graph: the compact cluster model. Nodes are 64-byte value structs
//     (NodeState) in one slice indexed by int32 IDs, with names, labels and
//     taints kept apart (cold); label keys and values are interned; every
//     topology domain is a contiguous index range of a topology-ordered node
//     list; and pod counts per group and service are kept per domain and per
//     (zone, node type) cell, so filters and scores read arrays, never
//     per-node maps. Node and pod changes are applied incrementally; after
//     nodes are added or removed the next cycle renumbers nodes into scan
//     order once, so a filter pass walks memory forwards.
//   - A plugin framework in the style of kube-scheduler: one small interface
//     per extension point (PreFilter, Filter, PostFilter, PreScore, Score,
//     NormalizeScore, Reserve/Unreserve, Bind), a *Status where nil means
//     success, and a Registry passed in Options. Optional interfaces let a
//     plugin answer per domain (DomainFilterPlugin: whole zones are skipped
//     without touching their nodes), per batch of nodes (BatchFilterPlugin,
//     BatchScorePlugin: no interface call per node) or explain a rejection
//     (FilterExplainer).
//   - Scheduler: a bounded input queue (Enqueue returns ErrQueueFull rather
//     than dropping) and the scheduling cycle, which samples nodes
//     adaptively (kube-scheduler's percentageOfNodesToScore rule), filters
//     and scores them on a bounded pool of goroutines in fixed chunks,
//     breaks ties with a seeded random source, and reserves the chosen node.
//     A fixed seed gives the same placements whatever the parallelism.
//
// Pods and nodes are plain structs (Pod, Node) that a Kubernetes layer can
// fill from corev1.Pod and corev1.Node; this package imports no Kubernetes
// code. Package plan builds `sluice schedule` on top of it.
package scheduler
