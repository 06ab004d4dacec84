package workloadref

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sluice-dev/sluice/api"
)

// ReplicasAnnotation, on a Deployment sluice scaled down, is its replica
// count before the first scale-down: sluice gives it back when it stops
// managing the rollout (Argo Rollouts leaves that to the user).
const ReplicasAnnotation = "sluice.io/workload-ref-replicas"

// fieldManager is sluice's field manager for every write.
const fieldManager = "sluice"

// Progress is what a scale-down decision reads of a rollout.
type Progress struct {
	// Healthy: the rollout's phase is Healthy.
	Healthy bool
	// Replicas is the rollout's spec.replicas; Ready counts its pods that
	// are Ready, over all its ReplicaSets.
	Replicas, Ready int32
}

// Target is the Deployment's replica count that scaleDown asks for, given
// the Deployment's original count and the rollout's progress; ok false
// leaves the Deployment as it is.
//
//   - never: the Deployment is left alone;
//   - onsuccess: 0 once the rollout is Healthy with all its pods Ready;
//   - progressively: the pods the rollout does not run yet
//     (replicas − Ready, never above the original count), and 0 once it
//     is Healthy with all its pods Ready. A rollout that loses Ready pods
//     gives them back to the Deployment, as Argo's does.
func Target(mode api.ScaleDown, original int32, p Progress) (replicas int32, ok bool) {
	done := p.Healthy && p.Ready >= p.Replicas
	switch mode {
	case api.ScaleDownOnSuccess:
		return 0, done
	case api.ScaleDownProgressively:
		if done {
			return 0, true
		}
		return min(max(p.Replicas-p.Ready, 0), original), true
	default:
		return 0, false
	}
}

// Scale sets the replicas of the Deployment ref names as Target decides,
// recording the original count in ReplicasAnnotation the first time. A
// missing Deployment is not an error: the rollout holds until it exists.
func (r *Resolver) Scale(ctx context.Context, namespace string, ref *api.WorkloadRef, p Progress) error {
	d, err := r.Deployment(namespace, ref.Name)
	if err != nil {
		return nil
	}
	original, err := originalReplicas(d)
	if err != nil {
		return err
	}
	target, ok := Target(ref.ScaleDown, original, p)
	if !ok || target == replicasOf(d) {
		return nil
	}
	r.log.Info("scaling referenced Deployment", "deployment", namespace+"/"+ref.Name, "scaleDown", ref.ScaleDown,
		"from", replicasOf(d), "to", target, "rolloutReady", p.Ready, "rolloutReplicas", p.Replicas)
	return r.patch(ctx, d, target, strconv.Itoa(int(original)))
}

// Release gives the Deployment back the replicas it had before sluice
// scaled it down, and drops ReplicasAnnotation; a Deployment sluice never
// scaled (or that is gone) is left alone.
func (r *Resolver) Release(ctx context.Context, namespace, name string) error {
	d, err := r.Deployment(namespace, name)
	if err != nil {
		return nil
	}
	if _, ok := d.Annotations[ReplicasAnnotation]; !ok {
		return nil
	}
	original, err := originalReplicas(d)
	if err != nil {
		return err
	}
	r.log.Info("restoring referenced Deployment's replicas", "deployment", namespace+"/"+name, "replicas", original)
	return r.patch(ctx, d, original, nil)
}

// patch sets spec.replicas and ReplicasAnnotation (nil removes it) with a
// merge patch: the Deployment is the user's, and sluice touches no other
// field of it.
func (r *Resolver) patch(ctx context.Context, d *appsv1.Deployment, replicas int32, annotation any) error {
	body, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{ReplicasAnnotation: annotation}},
		"spec":     map[string]any{"replicas": replicas},
	})
	if err != nil {
		return err
	}
	_, err = r.client.AppsV1().Deployments(d.Namespace).Patch(ctx, d.Name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: fieldManager})
	if err != nil {
		return fmt.Errorf("scale Deployment %s/%s to %d: %w", d.Namespace, d.Name, replicas, err)
	}
	return nil
}

// originalReplicas is the Deployment's count before sluice first scaled
// it: ReplicasAnnotation, or its replicas now.
func originalReplicas(d *appsv1.Deployment) (int32, error) {
	s, ok := d.Annotations[ReplicasAnnotation]
	if !ok {
		return replicasOf(d), nil
	}
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("Deployment %s/%s: annotation %s=%q is not a replica count", d.Namespace, d.Name, ReplicasAnnotation, s)
	}
	return int32(n), nil
}

// replicasOf is spec.replicas with Kubernetes' default of 1.
func replicasOf(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1
	}
	return *d.Spec.Replicas
}
