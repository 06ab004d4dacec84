package api

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// MaxReplicas is the most pods sluice accepts for one side of a rollout
// (spec.replicas and a step's setCanaryScale.replicas). Kubernetes' own
// scalability thresholds are 110 pods per node and 150,000 pods per
// cluster; a single ReplicaSet of 10,000 pods is already far beyond any
// practical service, while a value near 2^31 only makes the scheduler and
// the workload code allocate per pod until memory runs out (`sluice
// schedule` reached 2 GB in 20 s with replicas 2147483647).
const MaxReplicas = 10_000

// objectNames checks metadata.name and metadata.namespace the way
// Kubernetes checks a namespace: a DNS-1123 label. sluice builds resource
// names from them (clusters "<namespace>/<name>/stable", ReplicaSets
// "<name>-<hash>"), so a '/' or '.' in either would let one rollout's
// names collide with another's ("b/stable" as a name).
func (c *checker) objectNames(name, namespace string) {
	if name != "" {
		if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
			c.errorf("metadata.name", "%q is not a DNS-1123 label (as Kubernetes requires of names sluice builds resources from): %s", name, strings.Join(errs, "; "))
		}
	}
	if namespace != "" {
		if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
			c.errorf("metadata.namespace", "%q is not a DNS-1123 label (as Kubernetes requires of a namespace): %s", namespace, strings.Join(errs, "; "))
		}
	}
}

// replicasAtMost rejects a pod count above MaxReplicas.
func (c *checker) replicasAtMost(path string, v *int32) {
	if v != nil && *v > MaxReplicas {
		c.errorf(path, "%d is more than sluice's maximum of %d pods per side (see docs/strategy-files.md)", *v, MaxReplicas)
	}
}
