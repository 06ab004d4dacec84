package kube

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/scheduler/plan"
)

// SlimObject is the binder's informer transform; a factory shared with
// another reader of the pods (Options.Informers) keeps what it keeps and
// what that reader reads. The binder watches every pod in the cluster (it
// counts every bound pod on its node), so each cached pod costs memory
// whether sluice runs it or not: about 5.6 KiB per pod before this
// (e2e/scale -kube, 2,000 foreign pods; docs/scale.md).
// It keeps what podFromCore, podRequests and the bind and report paths
// read — metadata without managed fields and with only the annotations
// placement reads, the scheduling fields of the spec, each container's
// name, resources and restart policy, the status phase — and drops the
// rest (volumes, env, probes, conditions, container statuses), which the
// binder never reads and never writes back:
// binds and status reports are built fresh, not from the cached pod.
// Nodes keep what nodeFromCore reads (labels, taints, cordon,
// allocatable): a real node's status carries its image list, conditions,
// addresses and daemon info, kilobytes per node that the graph never uses.
func SlimObject(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Pod:
		slimPod(o)
	case *corev1.Node:
		slimNode(o)
	case metav1.Object:
		o.SetManagedFields(nil)
	}
	return obj, nil
}

func slimNode(n *corev1.Node) {
	n.ManagedFields = nil
	n.Annotations = nil
	n.Status = corev1.NodeStatus{Allocatable: n.Status.Allocatable}
}

func slimPod(p *corev1.Pod) {
	p.ManagedFields = nil
	p.Annotations = podAnnotationsRead(p.Annotations)
	p.Spec.Volumes = nil
	p.Spec.EphemeralContainers = nil
	p.Spec.Containers = slimContainers(p.Spec.Containers)
	p.Spec.InitContainers = slimContainers(p.Spec.InitContainers)
	p.Status = corev1.PodStatus{Phase: p.Status.Phase}
}

// podAnnotationsRead keeps the annotations placement reads (a baseline's
// canary, a plan's dependencies; podFromCore): foreign pods can carry
// large ones (kubectl's last-applied-configuration).
func podAnnotationsRead(all map[string]string) map[string]string {
	var kept map[string]string
	for _, k := range [...]string{api.BaselineOfAnnotation, plan.DependsOnAnnotation} {
		if v, ok := all[k]; ok {
			if kept == nil {
				kept = make(map[string]string, 2)
			}
			kept[k] = v
		}
	}
	return kept
}

func slimContainers(cs []corev1.Container) []corev1.Container {
	if cs == nil {
		return nil
	}
	out := make([]corev1.Container, len(cs))
	for i, c := range cs {
		out[i] = corev1.Container{Name: c.Name, Image: c.Image, Resources: c.Resources, RestartPolicy: c.RestartPolicy}
	}
	return out
}
