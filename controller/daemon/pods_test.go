package daemon

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/workload"
	"github.com/sluice-dev/sluice/scheduler/kube"
)

// TestSharedPodCacheKeepsWhatBinderAndActuatorRead: a pod through the
// shared cache's transform gives the binder what its own cache would
// (kube.SlimObject) and the actuator what its own would
// (workload.KeepPodFields), and drops the rest (volumes, env, probes,
// container statuses, the other conditions, managed fields).
func TestSharedPodCacheKeepsWhatBinderAndActuatorRead(t *testing.T) {
	full := richPod()
	obj, err := slimSharedObject(full.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	shared := obj.(*corev1.Pod)

	wantBinder, _ := kube.SlimObject(full.DeepCopy())
	gotBinder, _ := kube.SlimObject(shared.DeepCopy())
	if !equality.Semantic.DeepEqual(wantBinder, gotBinder) {
		t.Errorf("the binder reads of the shared cache's pod other than of its own:\nown    %+v\nshared %+v", wantBinder, gotBinder)
	}
	var wantActuator, gotActuator corev1.Pod
	workload.KeepPodFields(&wantActuator, full)
	workload.KeepPodFields(&gotActuator, shared)
	if !equality.Semantic.DeepEqual(wantActuator, gotActuator) {
		t.Errorf("the actuator reads of the shared cache's pod other than of its own:\nown    %+v\nshared %+v", wantActuator, gotActuator)
	}
	if !equality.Semantic.DeepEqual(full.Labels, shared.Labels) {
		t.Errorf("labels %v, want %v", shared.Labels, full.Labels)
	}
	c := shared.Spec.Containers[0]
	if len(shared.Spec.Volumes) != 0 || len(c.Env) != 0 || c.ReadinessProbe != nil || len(shared.Status.ContainerStatuses) != 0 ||
		len(shared.Status.Conditions) != 1 || len(shared.ManagedFields) != 0 {
		t.Errorf("the shared cache keeps what neither reads: %d volumes, env %v, probe %v, %d container statuses, conditions %v, %d managed fields",
			len(shared.Spec.Volumes), c.Env, c.ReadinessProbe, len(shared.Status.ContainerStatuses), shared.Status.Conditions, len(shared.ManagedFields))
	}
}

// richPod is a pod as a kubelet reports it: one of sluice's, with what
// neither reader reads beside what each does.
func richPod() *corev1.Pod {
	now := metav1.Now()
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "co-h1-x", Namespace: "shop", UID: "u1",
			Labels:        map[string]string{workload.LabelManagedBy: workload.ManagedByValue, workload.LabelRollout: "co", workload.LabelHash: "h1"},
			Annotations:   map[string]string{api.BaselineOfAnnotation: "h2", "kubectl.kubernetes.io/last-applied-configuration": "{...}"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}},
		},
		Spec: corev1.PodSpec{
			NodeName: "node-1", SchedulerName: workload.SchedulerName, NodeSelector: map[string]string{"disk": "ssd"},
			Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}},
			Volumes:     []corev1.Volume{{Name: "config"}},
			InitContainers: []corev1.Container{{Name: "init", Image: "shop/init:v1",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m")}}}},
			Containers: []corev1.Container{
				{Name: "app", Image: "shop/co:v1", Ports: []corev1.ContainerPort{{Name: "grpc", ContainerPort: 8080}},
					Env:            []corev1.EnvVar{{Name: "MODE", Value: "canary"}},
					ReadinessProbe: &corev1.Probe{PeriodSeconds: 5},
					Resources:      corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}}},
				{Name: "sidecar", Image: "shop/proxy:v1", Ports: []corev1.ContainerPort{{ContainerPort: 15001}}},
			},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: "10.244.0.7",
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now, Reason: "ok"},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue},
			},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true}},
		},
	}
}
