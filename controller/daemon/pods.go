package daemon

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"

	"github.com/sluice-dev/sluice/controller/workload"
	"github.com/sluice-dev/sluice/scheduler/kube"
)

// sharedPodInformers is one cluster's cache of pods for both the pod
// binder and the workload actuator when sluice binds its pods
// (--schedule-pods); nil without, when there is no binder. The binder
// watches every pod of the cluster (it counts them on their nodes); the
// actuator, which watched sluice's own again, now reads them from the
// same cache: each of sluice's pods is decoded and held once instead of
// twice, and the apiserver serves one watch of pods fewer (docs/scale.md).
func sharedPodInformers(o Options, client kubernetes.Interface) informers.SharedInformerFactory {
	if !o.SchedulePods {
		return nil
	}
	return informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(slimSharedObject))
}

// slimSharedObject keeps of a pod what the binder keeps (kube.SlimObject)
// and what the actuator reads (workload.KeepPodFields); of a node what the
// binder keeps.
func slimSharedObject(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return kube.SlimObject(obj)
	}
	full := *p // the slimming replaces p's slices and status, not full's
	if _, err := kube.SlimObject(p); err != nil {
		return nil, err
	}
	workload.KeepPodFields(p, &full)
	return p, nil
}
