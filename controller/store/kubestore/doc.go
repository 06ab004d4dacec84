// Package kubestore keeps sluice's state in the cluster (--state-store
// kubernetes): one SluiceRollout per rollout whose status holds the
// runner's record, and one ConfigMap in sluice's own namespace for what is
// sluice-wide (the alert outbox, delivered alert ids, the last processed
// commit). Every write uses optimistic concurrency (resourceVersion) and a
// fence (the leader elector's word that this replica still leads): a
// replica that lost the lease writes nothing.
package kubestore
