package workload

import "github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"

// FieldManager is the field manager of every server-side apply sluice makes.
const FieldManager = "sluice"

// Labels sluice puts on its ReplicaSets and their pod templates.
const (
	// LabelHash is Argo's pod-template hash label; it is also added to the
	// ReplicaSet's selector and to the pinned Services' selectors.
	LabelHash = v1alpha1.DefaultRolloutUniqueLabelKey
	// LabelManagedBy marks what sluice owns; the informers watch only that.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedByValue = "sluice"
	// LabelRollout names the rollout (its namespace is the object's).
	LabelRollout = "sluice.io/rollout"
)

// Annotations sluice puts on its ReplicaSets.
const (
	// AnnotationVersion is the rollout version (image) the set runs.
	AnnotationVersion = "sluice.io/version"
	// AnnotationRevision orders the ReplicaSets of a rollout: a set gets the
	// next revision when it is created or brought back from the history.
	AnnotationRevision = "sluice.io/revision"
	// AnnotationRole is the set's WorkloadRole, or RoleInactive once it is
	// out of ScaleWorkloads.Sets (scaled to 0, kept as history).
	AnnotationRole = "sluice.io/role"
	RoleInactive   = "inactive"
	// AnnotationStep and AnnotationWeight are, on the canary's ReplicaSet,
	// the canary's step index and canary weight, rewritten as the canary
	// moves: after a state loss they tell how far it had got (recall.go).
	AnnotationStep   = "sluice.io/step"
	AnnotationWeight = "sluice.io/canary-weight"
	// AnnotationAborted ("true") marks the set of an aborted canary,
	// written before the traffic moves back and kept while it drains (and
	// once it is inactive): after a state loss the canary is recovered as
	// aborted, never resumed. A retry or a new version clears it.
	AnnotationAborted = "sluice.io/aborted"
)

// SchedulerName is the pods' schedulerName when Options.SchedulePods is
// on: sluice's graph scheduler binds them.
const SchedulerName = "sluice"

// ZoneLabel is the node label that gives an endpoint its zone.
const ZoneLabel = "topology.kubernetes.io/zone"
