// Package workloadref is Kubernetes mode's side of spec.workloadRef: it
// resolves each workloadRef rollout of a loaded set to its Deployment's
// pod template (from a Deployment informer) before the set reaches the
// runner, reports when a referenced Deployment's template changes, and
// scales a referenced Deployment as the rollout's scaleDown says
// (never, onsuccess, progressively), giving it back its replicas when
// sluice stops managing the rollout.
package workloadref
