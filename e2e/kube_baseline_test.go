package e2e

import (
	"fmt"
	"maps"
	"math"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sluice-dev/sluice/api"
	"github.com/sluice-dev/sluice/controller/httpapi"
	"github.com/sluice-dev/sluice/controller/rollout"
	"github.com/sluice-dev/sluice/gateway/probe"
	"github.com/sluice-dev/sluice/internal/kubetest"
)

// judgeTemplate is an AnalysisTemplate with a sluice.io/judge metric that
// compares the canary's pods with the baseline's by pod-template hash. Its
// Prometheus is never asked: the test promotes past the analysis.
func judgeTemplate(ns string) string {
	return fmt.Sprintf(`apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata:
  name: judge
  namespace: %s
spec:
  metrics:
  - name: latency
    provider:
      plugin:
        sluice.io/judge:
          address: http://127.0.0.1:9
          canaryQuery: 'sum(rate(grpc_server_handled_total{rollouts_pod_template_hash="{{args.canary-hash}}"}[30s]))'
          baselineQuery: 'sum(rate(grpc_server_handled_total{rollouts_pod_template_hash="{{args.baseline-hash}}"}[30s]))'
`, ns)
}

// baselineReplicaSet is the rollout's ReplicaSet whose pods carry the
// baseline label, or nil.
func baselineReplicaSet(t *testing.T, c *kubetest.Cluster, ns, name string) *appsv1.ReplicaSet {
	t.Helper()
	list, err := c.Client.AppsV1().ReplicaSets(ns).List(ctxFor(t, 10*time.Second), metav1.ListOptions{LabelSelector: selector(name, "")})
	if err != nil {
		t.Fatal(err)
	}
	for i, rs := range list.Items {
		if rs.Spec.Template.Labels[api.BaselineLabel] == "true" {
			return &list.Items[i]
		}
	}
	return nil
}

// TestKubeBaseline: a rollout judged by sluice.io/judge runs a baseline of
// the stable version beside its canary, through the binary against a real
// control plane: the baseline's ReplicaSet starts with the canary's and
// at its size, its pods land in the canary's zones, the real gRPC xDS
// clients' calls split three ways as declared (the baseline gets the
// canary's share, taken from stable), and after the promotion the
// baseline gets no traffic and goes to 0 replicas; no call fails.
func TestKubeBaseline(t *testing.T) {
	c := kubetest.Shared(t)
	ns := c.Namespace(t)
	startPodBackends(t, c, ns)
	spec := kubeRollout{Name: "kb", Namespace: ns, Host: "kb.e2e", Version: v1, Replicas: 4,
		Steps:  "- setWeight: 40\n- pause: {}\n- analysis:\n    templates: [{templateName: judge}]\n",
		Canary: "scaleDownDelaySeconds: 2\n"}
	files := map[string]string{"analysis/judge.yaml": judgeTemplate(ns)}
	repo, d := kubeStart(t, c, spec, files)
	if rs := baselineReplicaSet(t, c, ns, "kb"); rs != nil {
		t.Fatalf("baseline ReplicaSet %s without a canary", rs.Name)
	}
	lg := startLoad(t, probe.LoadOptions{XDSServer: d.xdsAddr, Host: spec.Host, Clients: 2, Rate: 150})
	observe(t, lg, 20)

	spec.Version = v2
	commit := repo.push("v2", map[string]string{"rollouts/kb.yaml": spec.yaml()})
	st := d.waitStatus(ns+"/kb", 60*time.Second, "canary at 40 % beside its baseline", func(s httpapi.RolloutStatus) bool {
		return s.Commit == commit && s.Phase == rollout.PhasePaused && s.Weights.Canary == 40
	})
	if want := (api.Weights{Stable: 20, Canary: 40, Baseline: 40}); st.Weights != want {
		t.Errorf("status weights %+v, want %+v", st.Weights, want)
	}
	// 40 % of 4 replicas: 2 canary pods, and as many baseline pods.
	canaryRS := waitReplicaSet(t, c, ns, "kb", v2, 2, 30*time.Second)
	baseRS := baselineReplicaSet(t, c, ns, "kb")
	if baseRS == nil {
		t.Fatal("no baseline ReplicaSet")
	}
	hash := baseRS.Labels["rollouts-pod-template-hash"]
	if baseRS.Name != "kb-"+hash || baseRS.Spec.Template.Spec.Containers[0].Image != v1 || *baseRS.Spec.Replicas != 2 ||
		baseRS.Status.ReadyReplicas != 2 || baseRS.Annotations["sluice.io/role"] != "baseline" {
		t.Errorf("baseline ReplicaSet %s: image %s, replicas %d (ready %d), role %q; want kb-<hash>, v1, 2 ready, baseline",
			baseRS.Name, baseRS.Spec.Template.Spec.Containers[0].Image, *baseRS.Spec.Replicas, baseRS.Status.ReadyReplicas, baseRS.Annotations["sluice.io/role"])
	}
	if d := baseRS.CreationTimestamp.Sub(canaryRS.CreationTimestamp.Time); math.Abs(d.Seconds()) > 2 {
		t.Errorf("baseline created %v after the canary; want them started together", d)
	}
	canaryZones := zonesOf(t, c, kubePods(t, c, ns, selector("kb", canaryRS.Labels["rollouts-pod-template-hash"])))
	baseZones := zonesOf(t, c, kubePods(t, c, ns, selector("kb", hash)))
	if !maps.Equal(canaryZones, baseZones) || len(baseZones) != 2 {
		t.Errorf("baseline pods in zones %v, canary pods in %v: want the same two zones", baseZones, canaryZones)
	}

	o := observe(t, lg, 100)
	def := o.Class[probe.DefaultClass]
	for version, want := range map[string]float64{v1: 0.2, v2: 0.4, v1 + baselineSuffix: 0.4} {
		if got := def.Share(version); math.Abs(got-want) > 0.08 {
			t.Errorf("clients observed %.3f on %s of %d calls; declared %.2f", got, version, def.Answered(), want)
		}
	}

	lg.ResetWindow()
	d.cli("promote", "--full", ns+"/kb")
	st = d.waitStatus(ns+"/kb", 60*time.Second, "promoted", func(s httpapi.RolloutStatus) bool {
		return s.Phase == rollout.PhaseHealthy && s.StableVersion == v2
	})
	if st.Weights.Baseline != 0 {
		t.Errorf("weights after the promotion %+v; want no baseline", st.Weights)
	}
	kubetest.Eventually(t, 30*time.Second, "baseline scaled to 0", func() (bool, string) {
		rs := baselineReplicaSet(t, c, ns, "kb")
		return rs != nil && *rs.Spec.Replicas == 0, fmt.Sprintf("%+v", rs.Spec.Replicas)
	})
	o = lg.Observe()
	failed := o.Class[probe.DefaultClass][""].OK
	for _, cnt := range o.Class[probe.DefaultClass] {
		failed += cnt.Failed
	}
	if failed > 0 {
		t.Errorf("across the promotion: %d failed calls, split %v; want none failed", failed, o.Class[probe.DefaultClass])
	}
	after := observe(t, lg, 20)
	if got := after.Class[probe.DefaultClass].Share(v2); got != 1 {
		t.Errorf("after the promotion: %v; want all calls on v2", after.Class[probe.DefaultClass])
	}
}
