// Package kube binds Kubernetes pods with sluice's graph scheduler
// (package scheduler) in Kubernetes mode.
//
// A Binder owns three things:
//
//   - the graph's view of the cluster: shared informers on Nodes and Pods
//     feed scheduler.Graph (labels, taints, allocatable, topology; every
//     bound pod's requests on its node, whatever scheduler placed it);
//   - the scheduling queue of the Pending pods whose spec.schedulerName is
//     the binder's (default "sluice"): one scheduling cycle at a time picks
//     a node and assumes the placement in the graph, then a bounded pool of
//     goroutines binds each pod through the pods/binding subresource; a
//     failed bind un-assumes and retries with back-off;
//   - unschedulable reporting, as kube-scheduler does it: a pod no node
//     fits gets PodScheduled=False (reason Unschedulable, message the
//     scheduler's diagnosis "0/6 nodes are available: ...") and a Warning
//     FailedScheduling event, and waits until a node or a bound pod changes
//     before it is tried again (with back-off, never in a hot loop).
//
// Pods of one ReplicaSet form one scheduler group, so the FailureDomain
// filter spreads them over zones with maxSkew (see groupOf).
package kube
