package workload

import (
	"context"
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/rollout"
)

// TestScaleRunsBaseline: a baseline set runs the stable version's template
// with the baseline label under its own hash, in its own ReplicaSet; the
// stable Service does not select its pods; its endpoints come from its
// pods; and draining it (role old) keeps its template and pods.
func TestScaleRunsBaseline(t *testing.T) {
	e := newEnv(t)
	key := e.key("co")
	ctx := context.Background()
	_, err := e.c.Client.CoreV1().Services(e.ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "co-stable"},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "co"}, Ports: []corev1.ServicePort{{Name: "grpc", Port: 8080}}},
	}, metav1.CreateOptions{FieldManager: "user"})
	if err != nil {
		t.Fatal(err)
	}
	v1 := testRollout(e.ns, "co", "shop/co:v1", 2, 8080, &api.Workload{RevisionHistoryLimit: 10, StableService: "co-stable", Baseline: true, BaselineHash: "b1"})
	v2 := testRollout(e.ns, "co", "shop/co:v2", 2, 8080, &api.Workload{RevisionHistoryLimit: 10, StableService: "co-stable", Baseline: true, BaselineHash: "b2"})
	e.scale(key, set(rollout.RoleStable, "h1", 2, v1), set(rollout.RoleCanary, "h2", 1, v2), set(rollout.RoleBaseline, "b1", 1, v1))

	rs := e.getRS("co-b1")
	if rs.Annotations[AnnotationRole] != "baseline" || rs.Annotations[AnnotationVersion] != "shop/co:v1" {
		t.Errorf("annotations = %v", rs.Annotations)
	}
	if want := map[string]string{"app": "co", LabelHash: "b1"}; !maps.Equal(rs.Spec.Selector.MatchLabels, want) {
		t.Errorf("selector = %v, want %v", rs.Spec.Selector.MatchLabels, want)
	}
	wantPodLabels := map[string]string{"app": "co", api.BaselineLabel: "true", LabelHash: "b1", LabelManagedBy: ManagedByValue, LabelRollout: "co"}
	if !maps.Equal(rs.Spec.Template.Labels, wantPodLabels) || rs.Spec.Template.Spec.Containers[0].Image != "shop/co:v1" {
		t.Errorf("pod template labels %v image %s, want %v and the stable's image", rs.Spec.Template.Labels, rs.Spec.Template.Spec.Containers[0].Image, wantPodLabels)
	}
	if a := rs.Spec.Template.Annotations[api.BaselineOfAnnotation]; a != "h2" {
		t.Errorf("pod template annotation %s = %q, want the canary's hash h2", api.BaselineOfAnnotation, a)
	}
	if l := e.getRS("co-h1").Spec.Template.Labels; l[api.BaselineLabel] != "" {
		t.Errorf("stable pods labelled as baseline: %v", l)
	}

	stable := e.podAddrs(e.bindPods("h1", 2, 0), "8080")
	baseline := e.podAddrs(e.bindPods("b1", 1, 2), "8080")
	canary := e.podAddrs(e.bindPods("h2", 1, 3), "8080")
	// The stable Service is pinned to h1: its EndpointSlices hold the
	// stable pods only, never the baseline's.
	e.waitEndpoints(key, "h1", stable)
	e.waitEndpoints(key, "b1", baseline)
	e.waitEndpoints(key, "h2", canary) // the cache may not hold the canary's Ready pods yet
	e.waitReady("b1", rollout.PodsReady{Hash: "b1", Replicas: 1, Ready: 1})

	tr := e.m.ResolveTraffic(api.Traffic{Rollout: key, StableWorkload: "h1", CanaryWorkload: "h2", BaselineWorkload: "b1"})
	if !slices.Equal(tr.BaselineEndpoints, slices.Sorted(maps.Keys(baseline))) || !slices.Equal(tr.CanaryEndpoints, slices.Sorted(maps.Keys(canary))) ||
		!slices.Equal(tr.StableEndpoints, slices.Sorted(maps.Keys(stable))) {
		t.Errorf("ResolveTraffic = stable %v canary %v baseline %v\nwant %v %v %v", tr.StableEndpoints, tr.CanaryEndpoints, tr.BaselineEndpoints, stable, canary, baseline)
	}
	for a, zone := range baseline {
		if tr.EndpointZones[a] != zone {
			t.Errorf("baseline endpoint %s zone %q, want %q", a, tr.EndpointZones[a], zone)
		}
	}

	// Promotion: the baseline drains as role old; its template (and so its
	// pods) stay as they were.
	before := e.getRS("co-b1")
	e.scale(key, set(rollout.RoleStable, "h2", 2, v2), set(rollout.RoleOld, "h1", 2, v1), set(rollout.RoleOld, "b1", 1, v1))
	after := e.getRS("co-b1")
	if after.Generation != before.Generation || after.Annotations[AnnotationRole] != "old" {
		t.Errorf("draining baseline: generation %d → %d, role %q", before.Generation, after.Generation, after.Annotations[AnnotationRole])
	}
	e.waitEndpoints(key, "b1", baseline)
}
