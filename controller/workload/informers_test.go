package workload

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"

	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/internal/kubetest"
)

// TestInformersCacheOnlySluiceObjects: pods and ReplicaSets sluice did
// not make — some of them even carrying sluice.io/rollout of a real
// rollout — stay out of the caches (memory at scale: a cluster holds far
// more pods than sluice runs), do not count for the rollout, and what is
// cached has no managed fields, and its pods no volumes or container
// statuses; sluice_workload_cached_objects says so.
func TestInformersCacheOnlySluiceObjects(t *testing.T) {
	c := kubetest.Shared(t)
	reg := prometheus.NewRegistry()
	e := &env{t: t, c: c, ns: c.Namespace(t), rec: &recorder{ready: map[string]rollout.PodsReady{}}, reg: reg}
	const foreignPods, foreignSets = 20, 5
	createForeign(t, c, e.ns, foreignPods, foreignSets)
	e.m = e.startManager() // its first list already holds the foreign objects

	key := e.key("co")
	e.scale(key, set(rollout.RoleStable, "h1", 1, testRollout(e.ns, "co", "shop/co:v1", 1, 8080, nil)))
	e.bindPods("h1", 1, 0)
	e.waitReady("h1", rollout.PodsReady{Hash: "h1", Replicas: 1, Ready: 1})

	want := map[string]float64{cachedReplicaSet: 1, cachedPod: 1, cachedNode: 6}
	got := cachedObjects(t, reg)
	for kind, n := range want {
		if got[kind] != n {
			t.Errorf("sluice_workload_cached_objects{kind=%q} = %v, want %v (the cluster has %d foreign pods and %d foreign ReplicaSets in the namespace)",
				kind, got[kind], n, foreignPods, foreignSets)
		}
	}
	caches := e.m.cachesFor(e.ns)
	for _, obj := range append(caches.podIndex.List(), caches.rsIndex.List()...) {
		o, err := metaOf(obj)
		if err != nil {
			t.Fatal(err)
		}
		if o.GetLabels()[LabelManagedBy] != ManagedByValue {
			t.Errorf("cached %T %s is not sluice's (labels %v)", obj, o.GetName(), o.GetLabels())
		}
		if len(o.GetManagedFields()) != 0 {
			t.Errorf("cached %T %s keeps %d managed fields entries", obj, o.GetName(), len(o.GetManagedFields()))
		}
		if p, ok := obj.(*corev1.Pod); ok && (len(p.Spec.Volumes) != 0 || len(p.Status.ContainerStatuses) != 0) {
			t.Errorf("cached pod %s keeps %d volumes and %d container statuses; want only what endpoints and readiness read",
				p.Name, len(p.Spec.Volumes), len(p.Status.ContainerStatuses))
		}
		// kwok wrote four conditions with times; servesTraffic reads Ready's status.
		readyOnly := []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		if p, ok := obj.(*corev1.Pod); ok && !reflect.DeepEqual(p.Status.Conditions, readyOnly) {
			t.Errorf("cached pod %s keeps conditions %+v; want %+v", p.Name, p.Status.Conditions, readyOnly)
		}
		if rs, ok := obj.(*appsv1.ReplicaSet); ok && (len(rs.Spec.Template.Spec.Containers) != 0 || len(rs.Spec.Template.Labels) != 0 ||
			rs.Annotations[AnnotationVersion] == "" || rs.Status.Replicas != 1) {
			t.Errorf("cached ReplicaSet %s: template %+v, status %+v; want no template but its annotations, and the metadata and status",
				rs.Name, rs.Spec.Template, rs.Status)
		}
	}
	for _, obj := range e.m.nodeStore.List() {
		if n := obj.(*corev1.Node); len(n.Status.Conditions) != 0 || n.Labels[ZoneLabel] == "" {
			t.Errorf("cached node %s: labels %v, %d conditions; want its labels alone", n.Name, n.Labels, len(n.Status.Conditions))
		}
	}
	// Recall reads the templates from the API, whole.
	found, err := e.m.Recall(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if cs := found.Stable.Template.Spec.Containers; len(cs) != 1 || cs[0].Image != "shop/co:v1" {
		t.Errorf("Recall found stable %+v; want the set with its whole template", found.Stable)
	}
	if st := e.m.Status(key); len(st) != 1 || st[0].Replicas != 1 {
		t.Errorf("Status = %+v; want one set of 1 replica (foreign pods labelled sluice.io/rollout=co do not count)", st)
	}
}

// TestSharedPodCacheReadsOnlySluicePods: given a cache of every pod of
// the cluster (Options.Pods, the binder's in the daemon), the Manager
// reads sluice's pods of its namespaces from it and no other: a pod
// labelled like the rollout's but not sluice's, and one of sluice's in a
// namespace it does not watch, count neither for the rollout nor in
// sluice_workload_cached_objects. The shared cache keeps of each pod what
// KeepPodFields keeps, as the daemon's does beside the binder's fields.
func TestSharedPodCacheReadsOnlySluicePods(t *testing.T) {
	c := kubetest.Shared(t)
	reg := prometheus.NewRegistry()
	e := &env{t: t, c: c, ns: c.Namespace(t), rec: &recorder{ready: map[string]rollout.PodsReady{}}, reg: reg}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	createForeign(t, c, e.ns, 3, 0)
	// The look-alike has another controller, so that the ReplicaSet's
	// controller does not adopt it (its labels match the set's selector).
	owner, err := c.Client.CoreV1().ConfigMaps(e.ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	controller := true
	lookAlike := metav1.ObjectMeta{Name: "look-alike", Namespace: e.ns, Labels: map[string]string{LabelRollout: "co", LabelHash: "h1", "app": "co"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID, Controller: &controller}}}
	elsewhere := c.Namespace(t)
	for _, p := range []*corev1.Pod{
		{ObjectMeta: lookAlike},
		{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere", Namespace: elsewhere, Labels: map[string]string{LabelManagedBy: ManagedByValue, LabelRollout: "co", LabelHash: "h1"}}},
	} {
		p.Spec = corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "app", Image: "shop/co:v1", Ports: []corev1.ContainerPort{{ContainerPort: 8080}}}}}
		if _, err := c.Client.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e.pods = informers.NewSharedInformerFactoryWithOptions(c.Client, 0, informers.WithTransform(stripManagedFields))
	t.Cleanup(e.pods.Shutdown) // after the Manager's context ends (cleanups run last first)
	e.m = e.startManager()     // starts the shared pod informer

	key := e.key("co")
	e.scale(key, set(rollout.RoleStable, "h1", 1, testRollout(e.ns, "co", "shop/co:v1", 1, 8080, nil)))
	want := e.podAddrs(e.bindPods("h1", 1, 0), "8080")
	e.waitReady("h1", rollout.PodsReady{Hash: "h1", Replicas: 1, Ready: 1})
	e.waitEndpoints(key, "h1", want)
	if got := cachedObjects(t, reg)[cachedPod]; got != 1 {
		t.Errorf("sluice_workload_cached_objects{kind=%q} = %v, want 1 (the shared cache holds every pod)", cachedPod, got)
	}
	if n := len(e.pods.Core().V1().Pods().Informer().GetStore().List()); n < 6 {
		t.Errorf("the shared cache holds %d pods; want every pod of both namespaces (6)", n)
	}
	if st := e.m.Status(key); len(st) != 1 || st[0].Replicas != 1 {
		t.Errorf("Status = %+v; want one set of 1 replica (the look-alike pod and the other namespace's do not count)", st)
	}
}

// createForeign creates pods (bound to the kubetest nodes) and ReplicaSets
// (0 replicas) in ns without sluice's managed-by label; the first of each
// carries sluice.io/rollout=co, as a copied manifest might.
func createForeign(t *testing.T, c *kubetest.Cluster, ns string, pods, sets int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	labels := func(i int) map[string]string {
		l := map[string]string{"app": "foreign"}
		if i == 0 {
			l[LabelRollout] = "co"
		}
		return l
	}
	containers := []corev1.Container{{Name: "app", Image: "foreign/app:v1"}}
	for i := range pods {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("foreign-%d", i), Labels: labels(i)},
			Spec: corev1.PodSpec{NodeName: fmt.Sprintf("node-%d", i%6), Containers: containers}}
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	zero := int32(0)
	for i := range sets {
		name := fmt.Sprintf("foreign-%d", i)
		sel := map[string]string{"app": name}
		rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels(i)},
			Spec: appsv1.ReplicaSetSpec{Replicas: &zero, Selector: &metav1.LabelSelector{MatchLabels: sel},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel}, Spec: corev1.PodSpec{Containers: containers}}}}
		if _, err := c.Client.AppsV1().ReplicaSets(ns).Create(ctx, rs, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// cachedObjects reads sluice_workload_cached_objects from reg, by kind.
func cachedObjects(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "sluice_workload_cached_objects" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" {
					out[l.GetValue()] = m.GetGauge().GetValue()
				}
			}
		}
	}
	return out
}
