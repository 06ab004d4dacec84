// Package workload is the Kubernetes-mode actuator beside the gateway: it
// makes a rollout's ReplicaSets match the state machine's ScaleWorkloads
// action and reports back what the cluster did.
//
// Lifecycle:
//
//  1. New(Options) builds the informers (ReplicaSets and Pods labelled
//     app.kubernetes.io/managed-by=sluice, EndpointSlices, Nodes).
//  2. Start(ctx) starts them, waits for their caches and runs one worker
//     that turns cache changes into OnReady and OnEndpoints callbacks.
//  3. Scale applies one ScaleWorkloads (server-side apply, field manager
//     "sluice"): one ReplicaSet "<rollout>-<hash>" per set (an experiment
//     template's "<rollout>-<template>-<hash>", experiment.go), adopting a
//     pre-existing one of the same hash, every other ReplicaSet of the
//     rollout at 0 replicas within its revision history and deleted past it
//     (an experiment's at once),
//     and the selectors of the rollout's canary and stable Services pinned to
//     their side's hash. It plans from the ReplicaSet cache when that is
//     safe and applies only the sets that changed (writes.go); at most
//     Options.MaxScalesInFlight Scales talk to the apiserver at once.
//  4. Readiness, Endpoints and Status read the caches.
//
// Server-side apply uses client-go's typed apply configurations directly,
// not fluxcd/pkg/ssa: ssa's ResourceManager applies sets of unstructured
// manifests with an inventory and polls kstatus to wait for them, while
// here each ReplicaSet is built typed from the Rollout's template and
// readiness arrives through the informers as events for the state machine;
// the apply call underneath (a patch with field manager "sluice", forced)
// is the same.
//
// Kubernetes imports stay here: api, controller/rollout and gateway never
// see them.
package workload
