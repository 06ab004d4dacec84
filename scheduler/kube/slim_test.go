package kube

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/internal/kubetest"
	"github.com/sluice-dev/sluice/scheduler/plan"
)

// TestBinderCachesSlimPods: the binder caches every pod of the cluster,
// sluice's or not, so its cache keeps only what scheduling reads. A
// foreign pod with volumes, env and probes is cached without them and
// without managed fields, and keeps its node and requests.
func TestBinderCachesSlimPods(t *testing.T) {
	c := kubetest.Shared(t)
	ns := c.Namespace(t)
	b := startBinder(t, c, Options{})
	foreign := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "foreign", Namespace: ns, Labels: map[string]string{"app": "other"},
			Annotations: map[string]string{
				"kubectl.kubernetes.io/last-applied-configuration": fmt.Sprintf(`{"padding":"%04096d"}`, 0),
				plan.DependsOnAnnotation:                           "db",
			}},
		Spec: corev1.PodSpec{
			NodeName: zoneANode,
			Volumes:  []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			Containers: []corev1.Container{{
				Name: "app", Image: "other/app:v1",
				Env:            []corev1.EnvVar{{Name: "BIG", Value: fmt.Sprintf("%04096d", 0)}},
				VolumeMounts:   []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}},
				Resources:      corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m")}},
			}},
		},
	}
	if _, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), foreign, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var cached *corev1.Pod
	kubetest.Eventually(t, 30*time.Second, "foreign pod Running (kwok) in the binder's cache", func() (bool, string) {
		p, err := b.podLister.Pods(ns).Get("foreign")
		if err != nil {
			return false, err.Error()
		}
		cached = p
		return p.Status.Phase == corev1.PodRunning, string(p.Status.Phase)
	})
	live, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), "foreign", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(live.Status.Conditions) == 0 {
		t.Fatal("kwok wrote no conditions: the test cannot tell whether the cache drops them")
	}
	if len(cached.Status.Conditions) != 0 || !reflect.DeepEqual(cached.Annotations, map[string]string{plan.DependsOnAnnotation: "db"}) {
		t.Errorf("cached pod keeps %d conditions and the annotations %q; want none, and only the annotations placement reads",
			len(cached.Status.Conditions), slices.Sorted(maps.Keys(cached.Annotations)))
	}
	ctr := cached.Spec.Containers
	if len(cached.ManagedFields) != 0 || len(cached.Spec.Volumes) != 0 || len(ctr) != 1 ||
		len(ctr[0].Env) != 0 || len(ctr[0].VolumeMounts) != 0 || ctr[0].ReadinessProbe != nil {
		t.Errorf("cached pod keeps %d managed fields entries, %d volumes, containers %+v; want only what scheduling reads",
			len(cached.ManagedFields), len(cached.Spec.Volumes), ctr)
	}
	if got := podRequests(&cached.Spec); got.MilliCPU != 1500 || cached.Spec.NodeName != zoneANode {
		t.Errorf("cached pod requests %d mCPU on %q; want 1500 on %s", got.MilliCPU, cached.Spec.NodeName, zoneANode)
	}
}

// TestBinderCachesSlimNodes: the binder's node cache keeps what the
// graph reads (labels, taints, allocatable) and drops the rest of the
// node (managed fields, annotations, status conditions, addresses, node
// info), which the apiserver holds for the node.
func TestBinderCachesSlimNodes(t *testing.T) {
	c := kubetest.Shared(t)
	b := startBinder(t, c, Options{})
	live, err := c.Client.CoreV1().Nodes().Get(context.Background(), zoneANode, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(live.ManagedFields) == 0 || len(live.Status.Conditions) == 0 {
		t.Fatalf("node %s has %d managed fields entries and %d conditions: nothing to slim, the test proves nothing",
			zoneANode, len(live.ManagedFields), len(live.Status.Conditions))
	}
	cached, err := b.factory.Core().V1().Nodes().Lister().Get(zoneANode)
	if err != nil {
		t.Fatal(err)
	}
	if len(cached.ManagedFields) != 0 || len(cached.Annotations) != 0 || len(cached.Status.Conditions) != 0 ||
		len(cached.Status.Addresses) != 0 || cached.Status.NodeInfo != (corev1.NodeSystemInfo{}) {
		t.Errorf("cached node keeps %d managed fields entries, annotations %v, status %+v; want only what the graph reads",
			len(cached.ManagedFields), cached.Annotations, cached.Status)
	}
	if got, want := nodeFromCore(cached), nodeFromCore(live); !reflect.DeepEqual(got, want) {
		t.Errorf("graph view of the cached node %+v; want the live node's %+v", got, want)
	}
}
