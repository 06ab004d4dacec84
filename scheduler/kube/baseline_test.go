package kube

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/internal/kubetest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// baselineTemplate is a baseline pod template of rollout beside the
// canary of hash canary, as controller/workload builds it.
func baselineTemplate(rollout, hash, canary string) corev1.PodTemplateSpec {
	lbl := rolloutLabels(rollout, hash)
	lbl[api.BaselineLabel] = "true"
	tmpl := podTemplate(DefaultSchedulerName, "100m", lbl)
	tmpl.Annotations = map[string]string{api.BaselineOfAnnotation: canary}
	return tmpl
}

// TestBaselinePodsFollowTheCanarysZones: a baseline's pods go to the zones
// where its canary runs: beside a canary placed by hand in one zone, and,
// when both ReplicaSets are created at once (the baseline's first), zone
// for zone with the canary sluice places.
func TestBaselinePodsFollowTheCanarysZones(t *testing.T) {
	c := kubetest.Shared(t)
	ns := c.Namespace(t)
	startBinder(t, c, Options{})
	ctx := context.Background()

	t.Run("canary placed by hand", func(t *testing.T) {
		// node-i is in zone-{a,b,c}[i%3]: one rollout per zone.
		for i, node := range []string{"node-1", "node-2", "node-0"} {
			rollout := fmt.Sprintf("hand%d", i)
			tmpl := podTemplate(DefaultSchedulerName, "100m", rolloutLabels(rollout, "c"))
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: rollout + "-canary", Namespace: ns, Labels: tmpl.Labels}, Spec: tmpl.Spec}
			pod.Spec.NodeName = node
			if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			createReplicaSet(t, c.Client, ns, rollout+"-b", 1, baselineTemplate(rollout, "b", "c"))
		}
		for i, node := range []string{"node-1", "node-2", "node-0"} {
			rollout := fmt.Sprintf("hand%d", i)
			var pods []corev1.Pod
			kubetest.Eventually(t, 30*time.Second, rollout+" baseline pod Running", func() (bool, string) {
				pods, _ = runningPods(t, c.Client, ns, LabelRollout+"="+rollout+","+LabelHash+"=b")
				return len(pods) == 1, nodesOf(pods)
			})
			want := map[string]int{[]string{"zone-a", "zone-b", "zone-c"}[map[string]int{"node-0": 0, "node-1": 1, "node-2": 2}[node]]: 1}
			if got := zoneCounts(t, c.Client, pods); !maps.Equal(got, want) {
				t.Errorf("%s: baseline pod in %v (%s), want %v, beside its canary on %s", rollout, got, nodesOf(pods), want, node)
			}
		}
	})

	t.Run("created together", func(t *testing.T) {
		createReplicaSet(t, c.Client, ns, "web-b", 2, baselineTemplate("web", "b", "c"))
		createReplicaSet(t, c.Client, ns, "web-c", 2, podTemplate(DefaultSchedulerName, "100m", rolloutLabels("web", "c")))
		zonesOf := func(hash string) map[string]int {
			var pods []corev1.Pod
			kubetest.Eventually(t, 30*time.Second, "2 pods of "+hash+" Running", func() (bool, string) {
				pods, _ = runningPods(t, c.Client, ns, LabelRollout+"=web,"+LabelHash+"="+hash)
				return len(pods) == 2, nodesOf(pods)
			})
			return zoneCounts(t, c.Client, pods)
		}
		canary, baseline := zonesOf("c"), zonesOf("b")
		if !maps.Equal(canary, baseline) {
			t.Errorf("baseline in %v, canary in %v: want the same zones", baseline, canary)
		}
	})
}
