package e2e

import (
	"fmt"
	"math"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/gateway/probe"
	"github.com/sluice-dev/sluice/internal/kubetest"
)

// replicaSetOf finds the rollout's ReplicaSet whose pods run image, or nil.
func replicaSetOf(t *testing.T, c *kubetest.Cluster, ns, name, image string) *appsv1.ReplicaSet {
	t.Helper()
	list, err := c.Client.AppsV1().ReplicaSets(ns).List(ctxFor(t, 10*time.Second), metav1.ListOptions{LabelSelector: selector(name, "")})
	if err != nil {
		t.Fatal(err)
	}
	for i, rs := range list.Items {
		if rs.Spec.Template.Spec.Containers[0].Image == image {
			return &list.Items[i]
		}
	}
	return nil
}

// waitReplicaSet waits until the ReplicaSet of image has want replicas,
// all of them Ready, and returns it.
func waitReplicaSet(t *testing.T, c *kubetest.Cluster, ns, name, image string, want int32, timeout time.Duration) *appsv1.ReplicaSet {
	t.Helper()
	var rs *appsv1.ReplicaSet
	waitKube(t, timeout, fmt.Sprintf("ReplicaSet of %s at %d ready", image, want), func() (bool, string) {
		rs = replicaSetOf(t, c, ns, name, image)
		if rs == nil {
			return false, "no ReplicaSet"
		}
		s := rs.Status
		return *rs.Spec.Replicas == want && s.Replicas == want && s.ReadyReplicas == want,
			fmt.Sprintf("%s: spec %d, replicas %d, ready %d", rs.Name, *rs.Spec.Replicas, s.Replicas, s.ReadyReplicas)
	})
	return rs
}

// TestKubeCanary is a Kubernetes-mode canary through the binary against a
// real control plane: sluice creates v1's ReplicaSet and places its pods
// over the three zones; a push of v2 creates the canary's ReplicaSet at
// the size its weight needs, the real gRPC xDS clients reach the canary
// pods' backends in the declared share, and promotion moves all traffic
// to v2 before the old ReplicaSet goes to 0, without one failed call.
func TestKubeCanary(t *testing.T) {
	c := kubetest.Shared(t)
	ns := c.Namespace(t)
	backends := startPodBackends(t, c, ns)
	_ = backends
	repo := newGitRepo(t)
	spec := kubeRollout{Name: "kc", Namespace: ns, Host: "kc.e2e", Version: v1, Replicas: 4,
		Steps: "- setWeight: 25\n- pause: {}\n", Canary: "scaleDownDelaySeconds: 3\n"}
	repo.push("v1", map[string]string{"rollouts/kc.yaml": spec.yaml()})
	d := startDaemon(t, repo, "--kubernetes", "--kubeconfig", c.Kubeconfig)

	rs1 := waitReplicaSet(t, c, ns, "kc", v1, 4, 60*time.Second)
	pods := kubePods(t, c, ns, selector("kc", rs1.Labels["rollouts-pod-template-hash"]))
	for _, p := range pods {
		if p.Spec.SchedulerName != "sluice" || p.Spec.NodeName == "" {
			t.Errorf("pod %s: scheduler %q, node %q; want bound by sluice", p.Name, p.Spec.SchedulerName, p.Spec.NodeName)
		}
	}
	if z := zonesOf(t, c, pods); len(z) != 3 {
		t.Errorf("v1's 4 pods over zones %v; want all three zones used", z)
	}
	d.waitStatus(ns+"/kc", 60*time.Second, "stable v1", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhaseHealthy && s.StableVersion == v1
	})
	lg := startLoad(t, probe.LoadOptions{XDSServer: d.xdsAddr, Host: spec.Host, Clients: 2, Rate: 150})
	if o := observe(t, lg, 20); o.Class[probe.DefaultClass].Share(v1) != 1 {
		t.Fatalf("before the push: %v", o.Class[probe.DefaultClass])
	}

	spec.Version = v2
	commit := repo.push("v2", map[string]string{"rollouts/kc.yaml": spec.yaml()})
	rs2 := waitReplicaSet(t, c, ns, "kc", v2, 1, 60*time.Second)
	st := d.waitStatus(ns+"/kc", 60*time.Second, "canary at 25 %", func(s httpapi.RolloutStatus) bool {
		return s.Commit == commit && s.Phase == rollout.PhasePaused && s.Weights.Canary == 25
	})
	if st.CanaryVersion != v2 {
		t.Fatalf("canary: %+v", st)
	}
	if got := replicaSetOf(t, c, ns, "kc", v1); *got.Spec.Replicas != 4 {
		t.Errorf("stable scaled to %d during the canary; want 4 (no dynamicStableScale)", *got.Spec.Replicas)
	}
	o := observe(t, lg, 80)
	def := o.Class[probe.DefaultClass]
	if got := def.Share(v2); math.Abs(got-0.25) > 0.08 {
		t.Errorf("clients observed %.3f on the canary pods of %d calls; declared 0.25", got, def.Answered())
	}

	lg.ResetWindow()
	d.cli("promote", ns+"/kc")
	waitReplicaSet(t, c, ns, "kc", v2, 4, 60*time.Second)
	d.waitStatus(ns+"/kc", 60*time.Second, "promoted", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhaseHealthy && s.StableVersion == v2
	})
	promoted := time.Now()
	if got := replicaSetOf(t, c, ns, "kc", v1); *got.Spec.Replicas == 0 {
		t.Errorf("the old stable was scaled to 0 by the time the promotion was ACKed; want it kept for scaleDownDelaySeconds")
	}
	waitReplicaSet(t, c, ns, "kc", v1, 0, 30*time.Second)
	if held := time.Since(promoted); held < 2*time.Second {
		t.Errorf("old stable scaled down %v after the promotion settled; want ≥ scaleDownDelaySeconds (3s)", held)
	}
	if rs2.Name != "kc-"+rs2.Labels["rollouts-pod-template-hash"] {
		t.Errorf("canary ReplicaSet name %q, want kc-<pod-template-hash>", rs2.Name)
	}
	o = lg.Observe()
	failed := 0
	for _, cnt := range o.Class[probe.DefaultClass] {
		failed += cnt.Failed
	}
	failed += o.Class[probe.DefaultClass][""].OK
	if failed > 0 || o.Class[probe.DefaultClass].Share(v2) == 0 {
		t.Errorf("across the promotion: %d failed calls, split %v; want none failed", failed, o.Class[probe.DefaultClass])
	}
}
