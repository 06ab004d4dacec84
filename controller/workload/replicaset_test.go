package workload

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/rollout"
)

// testRollout is a rollout "name" whose pods run image and listen on port
// (no port when 0).
func testRollout(ns, name, image string, replicas int32, port int32, w *api.Workload) *api.Rollout {
	c := corev1.Container{Name: "app", Image: image}
	if port != 0 {
		c.Ports = []corev1.ContainerPort{{Name: "grpc", ContainerPort: port}}
	}
	if w == nil {
		w = &api.Workload{RevisionHistoryLimit: api.DefaultRevisionHistoryLimit}
	}
	return &api.Rollout{
		Key:      api.Key{Namespace: ns, Name: name},
		Version:  image,
		Replicas: replicas,
		Workload: w,
		Spec: v1alpha1.RolloutSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{c}},
			},
		},
	}
}

func TestReplicaSetApply(t *testing.T) {
	spec := testRollout("ns", "co", "shop/co:v2", 3, 8080, nil)
	tests := []struct {
		name         string
		schedulePods bool
		scheduler    string
	}{
		{"sluice schedules", true, SchedulerName},
		{"kube-scheduler schedules", false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			step := applyStep{Name: "co-abc", Revision: 4,
				Set: rollout.WorkloadSet{Role: rollout.RoleCanary, Version: "shop/co:v2", Hash: "abc", Replicas: 2, Spec: spec}}
			ac, err := replicaSetApply("ns", "co", step, tt.schedulePods)
			if err != nil {
				t.Fatal(err)
			}
			wantLabels := map[string]string{LabelHash: "abc", LabelManagedBy: ManagedByValue, LabelRollout: "co"}
			if !reflect.DeepEqual(ac.Labels, wantLabels) {
				t.Errorf("labels = %v, want %v", ac.Labels, wantLabels)
			}
			wantAnn := map[string]string{AnnotationVersion: "shop/co:v2", AnnotationRevision: "4", AnnotationRole: "canary"}
			if !reflect.DeepEqual(ac.Annotations, wantAnn) {
				t.Errorf("annotations = %v, want %v", ac.Annotations, wantAnn)
			}
			if *ac.Spec.Replicas != 2 {
				t.Errorf("replicas = %d, want 2", *ac.Spec.Replicas)
			}
			if want := map[string]string{"app": "co", LabelHash: "abc"}; !reflect.DeepEqual(ac.Spec.Selector.MatchLabels, want) {
				t.Errorf("selector = %v, want %v", ac.Spec.Selector.MatchLabels, want)
			}
			podLabels := withLabels(map[string]string{"app": "co"}, wantLabels)
			if !reflect.DeepEqual(ac.Spec.Template.Labels, podLabels) {
				t.Errorf("pod labels = %v, want %v", ac.Spec.Template.Labels, podLabels)
			}
			if got := deref(ac.Spec.Template.Spec.SchedulerName); got != tt.scheduler {
				t.Errorf("schedulerName = %q, want %q", got, tt.scheduler)
			}
			if got := *ac.Spec.Template.Spec.Containers[0].Image; got != "shop/co:v2" {
				t.Errorf("image = %q", got)
			}
			if spec.Spec.Template.Labels[LabelHash] != "" {
				t.Error("the rollout's own template was modified")
			}
		})
	}
}

func TestWantedPins(t *testing.T) {
	w := &api.Workload{CanaryService: "co-canary", StableService: "co-stable"}
	spec := testRollout("ns", "co", "v", 1, 80, w)
	set := func(role rollout.WorkloadRole, hash string) rollout.WorkloadSet {
		return rollout.WorkloadSet{Role: role, Hash: hash, Spec: spec}
	}
	tests := []struct {
		name string
		sets []rollout.WorkloadSet
		want map[string]string
	}{
		{"canary in flight", []rollout.WorkloadSet{set(rollout.RoleStable, "h1"), set(rollout.RoleCanary, "h2")},
			map[string]string{"co-stable": "h1", "co-canary": "h2"}},
		{"no canary: both on stable", []rollout.WorkloadSet{set(rollout.RoleStable, "h1"), set(rollout.RoleOld, "h0")},
			map[string]string{"co-stable": "h1", "co-canary": "h1"}},
		{"no services named", []rollout.WorkloadSet{{Role: rollout.RoleStable, Hash: "h1", Spec: testRollout("ns", "co", "v", 1, 80, nil)}},
			map[string]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := wantedPins(tt.sets); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("pins = %v, want %v", got, tt.want)
			}
		})
	}
	// Both Services on the stable hash: both are read, in a fixed order
	// (a map's order once decided which one's EndpointSlices counted).
	pins := servicePins{hashOf: map[string]string{"co-stable": "h1", "co-canary": "h1"}}
	for range 10 {
		if got := pins.servicesFor("h1"); !slices.Equal(got, []string{"co-canary", "co-stable"}) {
			t.Fatalf("servicesFor(h1) = %v", got)
		}
	}
}

func TestCheckPorts(t *testing.T) {
	noPort := testRollout("ns", "co", "v", 1, 0, nil)
	withSvc := testRollout("ns", "co", "v", 1, 0, &api.Workload{CanaryService: "c"})
	tests := []struct {
		name    string
		set     rollout.WorkloadSet
		wantErr string
	}{
		{"port declared", rollout.WorkloadSet{Role: rollout.RoleCanary, Spec: testRollout("ns", "co", "v", 1, 8080, nil)}, ""},
		{"no port, no service", rollout.WorkloadSet{Role: rollout.RoleCanary, Version: "v", Spec: noPort}, "canary version v: the first container declares no port"},
		{"no port, its service named", rollout.WorkloadSet{Role: rollout.RoleCanary, Spec: withSvc}, ""},
		{"no port, the other side's service named", rollout.WorkloadSet{Role: rollout.RoleStable, Spec: withSvc}, "stableService"},
		{"no port, old set draining", rollout.WorkloadSet{Role: rollout.RoleOld, Spec: noPort}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkPorts([]rollout.WorkloadSet{tt.set})
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("error = %v, want %q", err, tt.wantErr)
			}
		})
	}
}
