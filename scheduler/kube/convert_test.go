package kube

import (
	"reflect"
	"testing"

	"github.com/sluice-dev/sluice/scheduler"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestNodeFromCore(t *testing.T) {
	alloc := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("7500m"),
		corev1.ResourceMemory: resource.MustParse("1Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	tests := []struct {
		name string
		node corev1.Node
		want scheduler.Node
	}{
		{
			name: "allocatable and labels",
			node: corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{scheduler.LabelZone: "z"}},
				Status:     corev1.NodeStatus{Allocatable: alloc, Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")}},
			},
			want: scheduler.Node{Name: "n", Labels: map[string]string{scheduler.LabelZone: "z"}, Capacity: scheduler.Resources{MilliCPU: 7500, Memory: 1 << 30, Pods: 110}},
		},
		{
			name: "cordoned and tainted",
			node: corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: "n"},
				Spec:       corev1.NodeSpec{Unschedulable: true, Taints: []corev1.Taint{{Key: "k", Value: "v", Effect: corev1.TaintEffectNoSchedule}}},
			},
			want: scheduler.Node{Name: "n", Unschedulable: true, Taints: []scheduler.Taint{{Key: "k", Value: "v", Effect: scheduler.TaintNoSchedule}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := nodeFromCore(&tt.node); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("nodeFromCore = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func container(cpu, mem string) corev1.Container {
	return corev1.Container{Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem),
	}}}
}

func TestPodRequests(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	sidecar := container("100m", "10")
	sidecar.RestartPolicy = &always
	tests := []struct {
		name string
		spec corev1.PodSpec
		want scheduler.Resources
	}{
		{"containers add up", corev1.PodSpec{Containers: []corev1.Container{container("100m", "10"), container("200m", "20")}}, scheduler.Resources{MilliCPU: 300, Memory: 30}},
		{"a bigger init container wins", corev1.PodSpec{Containers: []corev1.Container{container("100m", "10")}, InitContainers: []corev1.Container{container("1", "5")}}, scheduler.Resources{MilliCPU: 1000, Memory: 10}},
		{"sidecars add to containers and to later init containers", corev1.PodSpec{
			Containers:     []corev1.Container{container("100m", "10")},
			InitContainers: []corev1.Container{sidecar, container("150m", "1")},
		}, scheduler.Resources{MilliCPU: 250, Memory: 20}},
		{"overhead", corev1.PodSpec{Containers: []corev1.Container{container("100m", "10")}, Overhead: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m")}}, scheduler.Resources{MilliCPU: 150, Memory: 10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := podRequests(&tt.spec); got != tt.want {
				t.Errorf("podRequests = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestGroupOf(t *testing.T) {
	yes := true
	tests := []struct {
		name               string
		meta               metav1.ObjectMeta
		wantGroup, wantSvc string
	}{
		{"sluice ReplicaSet", metav1.ObjectMeta{Namespace: "ns", Labels: map[string]string{LabelRollout: "web", LabelHash: "abc"}}, "ns/web/abc", "ns/web"},
		{"other controller", metav1.ObjectMeta{Namespace: "ns", OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "api-1", Controller: &yes}}}, "ns/replicaset/api-1", ""},
		{"hash without rollout falls back to the owner", metav1.ObjectMeta{Namespace: "ns", Labels: map[string]string{LabelHash: "abc"}, OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "x", Controller: &yes}}}, "ns/replicaset/x", ""},
		{"bare pod", metav1.ObjectMeta{Namespace: "ns"}, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, s := groupOf(&corev1.Pod{ObjectMeta: tt.meta})
			if g != tt.wantGroup || s != tt.wantSvc {
				t.Errorf("groupOf = %q, %q; want %q, %q", g, s, tt.wantGroup, tt.wantSvc)
			}
		})
	}
}

func TestAffinityTerms(t *testing.T) {
	req := func(terms ...corev1.NodeSelectorTerm) *corev1.Affinity {
		return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}}
	}
	in := corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "k", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}
	gt := corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "k", Operator: corev1.NodeSelectorOpGt, Values: []string{"1"}}}}
	tests := []struct {
		name string
		aff  *corev1.Affinity
		want []scheduler.SelectorTerm
	}{
		{"none", nil, nil},
		{"In", req(in), []scheduler.SelectorTerm{{MatchExpressions: []scheduler.SelectorRequirement{{Key: "k", Operator: scheduler.SelectorIn, Values: []string{"a"}}}}}},
		{"an unsupported term matches everything", req(in, gt), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := affinityTerms(tt.aff); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("affinityTerms = %+v, want %+v", got, tt.want)
			}
		})
	}
}
